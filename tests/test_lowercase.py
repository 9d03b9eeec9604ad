"""`nmt prepare --lowercase`: every split lowercased, recorded, and the model's input alike."""

from __future__ import annotations

import json

from cli_runner import invoke, write_toy_corpus

from nmt_cli.translator import Translator


def test_lowercase_data_trains_a_model_that_lowercases_its_input(tmp_path):
    src, tgt = write_toy_corpus(tmp_path / "corpus", n=120)
    dev_src, dev_tgt = tmp_path / "dev.src", tmp_path / "dev.tgt"
    dev_src.write_text("Apple RIVER\nÉté Stone\n", encoding="utf-8")
    dev_tgt.write_text("RIVER APPLE\nSTONE ÉTÉ\n", encoding="utf-8")
    data = tmp_path / "data"
    prepared = invoke(
        "prepare", "--src", src, "--tgt", tgt, "--dev-src", dev_src, "--dev-tgt", dev_tgt,
        "--vocab-size", "50", "--lowercase", "-o", data,
    )  # fmt: skip
    assert prepared.exit_code == 0, prepared.output
    assert "every split lowercased (--lowercase" in " ".join(prepared.stderr.split())
    assert (data / "dev.src").read_text(encoding="utf-8") == "apple river\nété stone\n"
    assert (data / "dev.tgt").read_text(encoding="utf-8") == "river apple\nstone été\n"
    train_tgt = (data / "train.tgt").read_text(encoding="utf-8")
    assert train_tgt == train_tgt.lower() and tgt.read_text(encoding="utf-8") != train_tgt
    manifest = json.loads((data / "prepare.json").read_text(encoding="utf-8"))
    assert manifest["options"]["lowercase"] is True
    assert manifest["counts"]["train"]["normalized"] == 0  # lowercasing is not counted there

    model = tmp_path / "model"
    trained = invoke(
        "train", data, "-o", model, "--max-steps", "2", "--valid-every", "2",
        "--emb-size", "8", "--hidden-size", "8", "--threads", "1",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    translator = Translator.load(model)
    assert translator.meta["lowercase"] is True
    assert translator.text_form("Apple  RIVER") == "apple river"
    upper = invoke("translate", "-m", model, "--beam", "1", input="APPLE RIVER\n")
    lower = invoke("translate", "-m", model, "--beam", "1", input="apple river\n")
    assert upper.exit_code == lower.exit_code == 0 and upper.stdout == lower.stdout
    pairs = invoke("align", "-m", model, "--view", "none", "--json", input="APPLE ||| River\n")
    same = invoke("align", "-m", model, "--view", "none", "--json", input="apple ||| river\n")
    assert (
        pairs.exit_code == 0
        and json.loads(pairs.stdout)["weights"] == json.loads(same.stdout)["weights"]
    )
    told = "writes lowercase (its data was prepared with --lowercase) and"
    for references, warned in ((dev_tgt, True), (data / "dev.tgt", False)):
        scored = invoke("eval", "-m", model, "--src", dev_src, "--ref", references)
        assert scored.exit_code == 0, scored.output
        assert (told in " ".join(scored.stderr.split())) is warned, references
    told_to = invoke("eval", "-m", model, "--src", dev_src, "--ref", dev_tgt)
    assert "give --lowercase for a score of what the model can write" in " ".join(
        told_to.stderr.split()
    )
    ignored = invoke("eval", "-m", model, "--src", dev_src, "--ref", dev_tgt, "--lowercase")
    assert ignored.exit_code == 0 and told not in " ".join(ignored.stderr.split())
    assert "case:lc" in ignored.stdout


def test_without_lowercase_the_text_keeps_its_case(toy_model_dir, toy_data_dir):
    manifest = json.loads((toy_data_dir / "prepare.json").read_text(encoding="utf-8"))
    assert manifest["options"]["lowercase"] is False
    translator = Translator.load(toy_model_dir)
    assert not translator.meta.get("lowercase")
    assert translator.text_form("Apple  RIVER") == "Apple RIVER"
