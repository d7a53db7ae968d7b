from bot.slack.mrkdwn import code, code_block, escape, fit, plain


def test_escape_neutralises_mentions_links_and_entities():
    assert (escape("<!channel> <@U1> <https://x|y> a&b")
            == "&lt;!channel&gt; &lt;@U1&gt; &lt;https://x|y&gt; a&amp;b")


def test_fit_never_splits_an_entity_and_marks_the_cut():
    text = escape("x" * 10 + "<" * 10)
    for limit in range(8, len(text)):
        out = fit(text, limit)
        assert len(out) <= limit and out.endswith("…")
        assert "&" not in out.rsplit(";", 1)[-1]  # no partial entity after the last complete one
    assert fit("short", 10) == "short"


def test_code_and_code_block_stay_inside_their_fences():
    assert code("a ``` b <!here>") == "`a ˋˋˋ b &lt;!here&gt;`"
    block = code_block(["x" * 1000] * 10, limit=3000)
    assert len(block) <= 3000 and block.startswith("```\n") and block.endswith("\n```")
    assert code_block([]) == ""
    assert plain("a\n  b" + "c" * 200, 20).startswith("a bc") and len(plain("c" * 200, 20)) == 20
