from engine.masking import mask


def test_masks_variable_tokens_keeps_words():
    assert mask("forward done in 0.506s") == "forward done in <*>"
    assert mask("Tried to allocate 136.00 MiB on 10.0.0.12:2222") == "Tried to allocate <*> MiB on <*>"
    assert mask("ptr 0x7f14cc5b60c0 shape [1, 2048, 4096]") == "ptr <*> shape <*>"
    assert mask("open /data/ckpt/iter_0001/model.pt failed") == "open <*> failed"
    assert mask("EI0002: notify") == "EI0002: notify"
    assert mask("mlx5_0 link down on node-003") == "mlx5_0 link down on <*>"


def test_identical_after_masking_for_synchronised_ranks():
    a = mask("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4512) ran for 600044 ms")
    b = mask("[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77) ran for 600001 ms")
    assert a == b


def test_templates_keep_identifiers_with_digits():
    from engine.fold import fold_text

    line = "[c10d] EXT4-fs error on mlx5_0 cuda:0 bf16 ptr 0x7f3a9c00 after 12 ms"
    assert mask(fold_text(line)) == "[c10d] EXT4-fs error on mlx5_0 cuda:0 bf16 ptr <*> after <*> ms"
    assert mask("device cuda:0 step:12") == "device cuda:0 step:<*>"
