"""An outsider's benchmark generator (`l4 bench othergen`): failed LLM-training jobs in other log wording.

Written without reading the engine, its data or `engine/bench/generate.py`: the wording of its lines comes
from real logs (public issue threads, vendor pages, the BigScience chronicles, data/*.yaml names each
source), the fault kinds and their labels from what it generates. Held out from the engine's development.
"""

from engine.bench.othergen.corpus import case_kinds, generate_corpus, kinds, split_of

__all__ = ["case_kinds", "generate_corpus", "kinds", "split_of"]
