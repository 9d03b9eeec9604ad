"""SentencePiece training and use on tiny corpora, with the small-corpus vocabulary fallback."""

from __future__ import annotations

import random

import pytest

from nmt_cli.data.tokenizer import (
    BOS_ID,
    CJK_CHARACTER_COVERAGE,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    auto_character_coverage,
    train_tokenizer,
)
from nmt_cli.errors import ArtifactError, ConfigError

WORDS = "the a cat dog sat ran on under mat house big small red green sees likes".split()
WORDS += [
    f"{stem}{end}"
    for stem in ("walk", "talk", "jump", "play", "read")
    for end in ("", "s", "ed", "ing")
]
WORDS += "yesterday tomorrow quickly slowly garden kitchen window river mountain forest".split()


def _sentences(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("spm") / "spm"
    return train_tokenizer(_sentences(), prefix, vocab_size=60)


def test_model_has_the_fixed_special_ids(trained):
    tokenizer = Tokenizer(trained.model)
    assert tokenizer.vocab_size == 60 == trained.vocab_size
    assert not trained.fell_back
    assert trained.vocab.is_file()
    pieces = [tokenizer.id_to_piece(i) for i in (PAD_ID, UNK_ID, BOS_ID, EOS_ID)]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tokenizer.piece_to_id("<unk>") == UNK_ID


def test_encode_decode_round_trip(trained):
    tokenizer = Tokenizer(trained.model)
    text = "the big cat sat on the red mat"
    ids = tokenizer.encode(text)
    assert BOS_ID not in ids and EOS_ID not in ids
    assert tokenizer.decode(ids) == text
    assert "".join(tokenizer.encode_pieces(text)).replace("▁", " ").strip() == text
    assert tokenizer.encode_batch([text, ""]) == [ids, []]


def test_decode_drops_pad_bos_eos_anywhere(trained):
    tokenizer = Tokenizer(trained.model)
    ids = tokenizer.encode("the cat")
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "the cat"
    assert tokenizer.decode([*ids[:1], EOS_ID, *ids[1:]]) == "the cat"


def test_too_small_corpus_falls_back_to_the_largest_vocabulary(tmp_path):
    trained = train_tokenizer(_sentences(40), tmp_path / "spm", vocab_size=8000)
    assert trained.fell_back
    assert trained.requested_vocab_size == 8000
    assert 20 < trained.vocab_size < 8000
    assert Tokenizer(trained.model).vocab_size == trained.vocab_size


def test_bpe_falls_back_too(tmp_path):
    trained = train_tokenizer(_sentences(40), tmp_path / "bpe", 8000, model_type="bpe")
    assert trained.fell_back
    assert Tokenizer(trained.model).vocab_size == trained.vocab_size


def test_vocabulary_smaller_than_the_alphabet_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="too small.*needs at least"):
        train_tokenizer(_sentences(50), tmp_path / "spm", vocab_size=10)


@pytest.mark.parametrize(
    "kwargs", [{"vocab_size": 4}, {"vocab_size": 100, "model_type": "word-piece"}]
)
def test_bad_training_options_are_config_errors(tmp_path, kwargs):
    with pytest.raises(ConfigError):
        train_tokenizer(_sentences(10), tmp_path / "spm", **kwargs)


def test_train_tokenizer_reads_files_and_returns_the_model_path(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(_sentences()) + "\n", encoding="utf-8")
    model = train_tokenizer(corpus, tmp_path / "m", vocab_size=50).model
    assert model == tmp_path / "m.model"
    assert Tokenizer(model).vocab_size == 50


def test_chinese_gets_cjk_character_coverage(tmp_path):
    rng = random.Random(1)
    chars = "我你他喜欢吃桔子苹果很好的是不在有人大小天"
    text = ["".join(rng.choice(chars) for _ in range(rng.randint(4, 12))) for _ in range(300)]
    assert auto_character_coverage(text) == CJK_CHARACTER_COVERAGE
    assert auto_character_coverage(_sentences(), text) == CJK_CHARACTER_COVERAGE
    assert auto_character_coverage(_sentences()) == 1.0
    trained = train_tokenizer(text, tmp_path / "zh", vocab_size=60)
    assert trained.character_coverage == CJK_CHARACTER_COVERAGE
    assert Tokenizer(trained.model).decode(Tokenizer(trained.model).encode(text[0])) == text[0]


def test_missing_or_foreign_model_is_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="does not exist"):
        Tokenizer(tmp_path / "none.model")
    bogus = tmp_path / "bogus.model"
    bogus.write_bytes(b"not a model")
    with pytest.raises(ArtifactError, match="bogus.model is not a SentencePiece model"):
        Tokenizer(bogus)


def test_model_with_other_special_ids_is_refused(tmp_path):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_sentences()),
        model_prefix=str(tmp_path / "plain"),
        vocab_size=50,
        minloglevel=2,
    )
    with pytest.raises(ArtifactError, match="special ids"):
        Tokenizer(tmp_path / "plain.model")


def test_vocab_file_lists_every_piece_and_training_is_reproducible(trained, tmp_path):
    lines = trained.vocab.read_text(encoding="utf-8").splitlines()
    assert len(lines) == trained.vocab_size
    assert lines[0] == "<pad>\t0"
    again = train_tokenizer(_sentences(), tmp_path / "again", vocab_size=60)
    assert again.model.read_bytes() == trained.model.read_bytes()
    assert str(tmp_path).encode() not in again.model.read_bytes()


def test_a_line_longer_than_sentencepieces_default_limit_is_trained_on(tmp_path):
    # SentencePiece's own limit (4,192 bytes) would leave this line, the only one with these
    # letters, out of training: they would then all be unknown.
    lines = ["the cat sat on the mat ."] * 200 + [" ".join(["zyxwvqj"] * 900)]
    trained = train_tokenizer(lines, tmp_path / "long", 60)
    tokenizer = Tokenizer(trained.model)
    assert UNK_ID not in tokenizer.encode("zyxwvqj")


@pytest.mark.parametrize(
    ("pieces", "text"),
    [
        (["▁a", "▁man", "."], "a man."),
        (["▁三", "▁个", "▁", "▁李雷"], "三 个 李雷"),  # a lone ▁ before a word: one space
        (["▁", "▁", "x", "▁"], "x"),
        ([], ""),
    ],
)
def test_target_pieces_become_text_with_single_spaces(pieces, text):
    from nmt_cli.decoding import pieces_text

    assert pieces_text(pieces) == text


def test_a_stray_space_inside_chinese_written_without_spaces_is_dropped():
    from types import SimpleNamespace

    from nmt_cli.scripts import join_unsegmented, mostly_unsegmented
    from nmt_cli.translator import Translator

    assert join_unsegmented("对不起， 我情不自禁。") == "对不起，我情不自禁。"
    assert join_unsegmented("我喜欢 Tom 和 他的狗。") == "我喜欢 Tom 和他的狗。"  # Tom's stay
    pieces = ["▁对不起", "，", "▁我", "情不自禁", "。"]  # a word-starting piece in mid-sentence

    def text(meta, guided=0.0, unit="char"):
        config = SimpleNamespace(train=SimpleNamespace(guided_alignment=guided, align_unit=unit))
        return Translator(None, config, None, None, None, None, meta=meta)._text(pieces)

    assert text({"tgt_unsegmented": True}) == "对不起，我情不自禁。"
    assert text({"tgt_unsegmented": False}) == text({}) == "对不起， 我情不自禁。"
    # a model taught word links keeps the words its pieces make: its links count them
    assert text({"tgt_unsegmented": True}, guided=1.0, unit="word") == "对不起， 我情不自禁。"
    assert text({"tgt_unsegmented": True}, guided=1.0, unit="char") == "对不起，我情不自禁。"
    # a model's text is judged as a whole: segmented lines with a long word do not tip it
    segmented = ["对不起 。", "我 爱 中华人民共和国 。", "我 的 朋友 星期天 起床 了 。", "你 好 。",
                 "他 上 周 在 哪里 跳舞 了 ？", "一 个 男孩 早上 在 树 旁边 购物 了 。"]  # fmt: skip
    assert not mostly_unsegmented(segmented)
    assert mostly_unsegmented(["对不起，我情不自禁。", "火车站在哪里？", "Tom 是我的朋友。"])
    short = ["谢谢！", "是。", "好 。", "はい。"]  # one or two letters say nothing either way
    assert mostly_unsegmented(short + ["对不起，我情不自禁。"])
