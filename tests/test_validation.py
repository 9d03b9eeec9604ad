"""Which dev sentences a validation translates for its BLEU."""

from __future__ import annotations


def test_validation_bleu_reads_dev_sentences_spread_over_the_whole_split():
    from nmt_cli.validation import spread_sample

    picked = spread_sample(1000, 500)  # e.g. a held-out split in the order of a sorted corpus
    assert len(picked) == len(set(picked)) == 500 and picked == sorted(picked)
    assert picked[0] == 0 and picked[-1] == 998 and picked[250] == 500
    assert spread_sample(7, 3) == [0, 2, 4]
    assert spread_sample(10, 0) == spread_sample(10, 10) == spread_sample(10, 50) == list(range(10))
