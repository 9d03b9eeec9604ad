"""What `nmt align` does with each aligned pair: Pharaoh/JSON on stdout, views on stderr, AER."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nmt_cli.cli.boundary import stderr_console, warn


class AlignOutput:
    def __init__(self, view: str, json_output: bool, gold: Path | None, png: Path | None):
        self.view = view
        self.json_output = json_output
        self.gold_path = gold
        self.png = png
        self.predicted: list[set] = []
        self.lengths: list[tuple[int, int]] = []  # of each pair, in the units of its links
        # the whole length of a side longer than the model reads, by pair index
        self.full_lengths: dict[int, list[int | None]] = {}
        self.gold: list | None = None
        self.listed: int | None = None  # a NAACL gold: the last sentence it has a link for
        self.note: str | None = None  # said under the first view (what else the links weigh)
        self.score_json: Path | None = None  # where the score is also written, as JSON

    def check_gold(self, pairs: int | None = None) -> None:
        """Read the gold file, if any: an empty one, or one of another length than the `pairs`
        to align (when known before aligning), fails before anything is written."""
        from nmt_cli.alignment import LinkListedGold, read_gold
        from nmt_cli.errors import InputError

        if self.gold_path is None:
            return
        self.gold = read_gold(self.gold_path)
        first = 1  # the first sentence a NAACL gold has a link for
        if isinstance(self.gold, LinkListedGold):  # the sentences up to its last link
            self.listed, first = len(self.gold), self.gold.first
        if not self.gold:
            raise InputError(
                f"{self.gold_path} is empty: give the gold alignments of these sentence pairs, "
                "one line per pair"
            )
        self._warn_about_gold_links()
        if pairs is not None and isinstance(self.gold, LinkListedGold):
            self.gold = self.gold.padded(pairs)  # the last pairs may have no gold link
        if pairs is not None:
            self.gold = _without_trailing_empty(self.gold, pairs)
        if pairs is not None and pairs != len(self.gold):
            numbered = (
                f" (its sentence numbers start at {first:,}: number the sentences of these "
                "pairs from 1)"
                if first > 1 and len(self.gold) > pairs
                else ""
            )
            raise InputError(
                f"{self.gold_path} has {_alignments(len(self.gold))} but there are {pairs:,} "
                f"pairs to align: give the gold file of these sentence pairs{numbered}"
            )

    def _warn_about_gold_links(self) -> None:
        """A NAACL file that links word 0 to word 0 counts its words from 0 (in its own
        numbering, from 1, 0 is the NULL word); without links, or sure links, there is no
        recall to measure. (Other links to NULL are counted in the score's line.)"""
        import shlex

        if null_to_null := getattr(self.gold, "null_to_null", 0):
            fix = f"awk 'NF {{$2++; $3++}} 1' {shlex.quote(str(self.gold_path))} > gold-1based.wa"
            warn(
                f"{self.gold_path} links word 0 to word 0 in {null_to_null:,} sentence"
                f"{'s' * (null_to_null != 1)}, which means nothing where words count from 1 "
                "(as NAACL files do: 0 is NULL), so it seems to count from 0: its "
                f"{self.gold.nulls:,} links to word 0 are left out and the others read one word "
                f"off; if so, add 1 to both numbers: {fix}"
            )
        if not any(g.possible for g in self.gold):
            warn(
                f"{self.gold_path} leaves no link to score against (AER is 100% whatever is "
                "predicted): check that it is the gold file of these pairs"
            )
        elif not any(g.sure for g in self.gold):
            warn(
                f"{self.gold_path} has no sure links: recall is 0 and AER counts only the "
                "possible ones; check the file's labels (NAACL lines end in S for sure, P for "
                "possible; Pharaoh writes i-j for sure, i?j or ipj for possible)"
            )

    def run(self, pairs) -> None:
        from nmt_cli.alignment import LinkListedGold, format_pharaoh

        if self.gold_path is not None and self.gold is None:
            self.check_gold()
        gold = self.gold
        # Scored against gold, the links are written once the score is in: a gold file that
        # does not fit the pairs fails with nothing written.
        held: list[str] | None = [] if gold is not None else None
        first = None  # the first pair's grid, for --png
        out = sys.stdout
        one_way = total = 0
        for index, pair in enumerate(pairs):
            total, one_way = index + 1, one_way + pair.one_way
            if isinstance(gold, LinkListedGold) and index == len(gold):
                gold = gold.padded(index + 1)  # a pair after the last with a gold link
            if gold is not None and index == len(gold):  # no need to align the rest first
                from nmt_cli.errors import InputError

                raise InputError(
                    f"{self.gold_path} has {_alignments(len(gold))} but there are more pairs "
                    "to align: give the gold file of these sentence pairs"
                )
            if self.json_output:
                line = json.dumps(self._record(pair), ensure_ascii=False) + "\n"
            else:
                line = format_pharaoh(pair.links) + "\n"
            if held is None:
                out.write(line)
            else:
                held.append(line)
            if self.view != "none":
                self._show(index, pair)
            if index == 0 and self.png:
                first = (pair.weights, pair.src_words, pair.tgt_words, pair.links)
                if held is None:
                    self._save_png(first)
            if gold is not None:
                self.predicted.append(pair.links)
                whole = self.full_lengths.pop(index, (None, None))
                self.lengths.append(
                    (whole[0] or _real(pair.src_words), whole[1] or _real(pair.tgt_words))
                )
        if gold is not None:
            score = self._score(gold)
            if self.png and self.predicted:  # drawn, as the links are written, once scored
                self._save_png(first)
            out.writelines(held)
            out.flush()
            self._report(score, len(self.predicted))
        out.flush()
        if one_way:
            warn(
                f"{one_way:,} of {total:,} pairs have the links of -m alone: --reverse-model "
                "split their words otherwise; check that it is the target→source model of -m"
            )

    def _save_png(self, grid) -> None:
        from nmt_cli.render.plot import save_heatmap_png

        if problem := save_heatmap_png(*grid, self.png):
            warn(problem)

    def _record(self, pair) -> dict:
        from nmt_cli.alignment import format_pharaoh

        return {
            "source": pair.source,
            "target": pair.target,
            "translated": pair.translated,
            "src_words": pair.src_words,
            "tgt_words": pair.tgt_words,
            "alignment": format_pharaoh(pair.links),
            "weights": [[round(float(w), 4) for w in row] for row in pair.weights],
        }

    def _show(self, index: int, pair) -> None:
        from nmt_cli.render.heatmap import render_heatmap, render_links

        console = stderr_console()
        console.rule(
            f"pair {index + 1}" + (" (translated)" if pair.translated else ""), style="dim"
        )
        if not pair.tgt_words or not pair.src_words:
            console.print("[dim](empty)[/]")
            return
        grid = (pair.weights, pair.src_words, pair.tgt_words)
        if self.view == "links":
            console.print(render_links(*grid, links=pair.links))
        else:
            console.print(render_heatmap(*grid, pair.links, max_width=console.width))
        if index == 0 and self.view == "links":
            console.print("● links (the output's); bars: weight", style="dim", highlight=False)
        if self.note and index == 0:
            console.print(self.note, style="dim", markup=False, highlight=False)

    def _fits_one_based(self, gold) -> bool:
        """Whether every gold link, each number lowered by one, lies inside its sentence pair."""
        return all(
            1 <= i <= n_src and 1 <= j <= n_tgt
            for ref, (n_src, n_tgt) in zip(gold, self.lengths, strict=False)
            for i, j in ref.possible
        )

    def _fits_swapped(self, gold) -> bool:
        """Whether every gold link, read as target-source, lies inside its sentence pair."""
        return all(
            0 <= j < n_src and 0 <= i < n_tgt
            for ref, (n_src, n_tgt) in zip(gold, self.lengths, strict=False)
            for i, j in ref.possible
        )

    def _gold_fix(self, gold) -> str:
        """What to do about gold links outside their sentences."""
        from nmt_cli.alignment import LinkListedGold

        listed = isinstance(gold, LinkListedGold)  # NAACL: counted from 1, and read as such
        if not listed and self._fits_one_based(gold):
            return (
                "every gold link fits with both numbers lowered by one: the file may count "
                "words from 1, Pharaoh links count from 0 (subtract 1 from each number)"
            )
        if self._fits_swapped(gold):
            return (
                "every gold link fits with its two numbers swapped: the file may list "
                "target-source links; swap each i-j to j-i (in a NAACL file, the second and "
                "third columns), or align in the direction it was made for (--src and --tgt "
                "swapped, with a model of that direction)"
            )
        if listed:
            return "give the gold links of these sentence pairs"
        return "give the gold links of these sentence pairs, counting words from 0"

    def _score(self, gold):
        """The score of the links against `gold`; InputError if the gold does not fit them."""
        from nmt_cli.alignment import GoldAlignment, LinkListedGold, check_range, score_alignments
        from nmt_cli.errors import InputError

        base = 1 if isinstance(gold, LinkListedGold) else 0  # NAACL counts words from 1
        gold = _without_trailing_empty(gold, len(self.predicted))
        if len(gold) != len(self.predicted):
            raise InputError(
                f"{self.gold_path} has {_alignments(len(gold))} but {len(self.predicted):,} pairs "
                "were aligned: give the gold file of these sentence pairs"
            )
        lengths = [s for s, _ in self.lengths], [t for _, t in self.lengths]
        problems = check_range(gold, *lengths, base=base)
        if problems:  # a link that cannot exist would count as missed: the score would be wrong
            others = len(problems) - 1
            more = f" (and {others:,} more such link{'s' * (others > 1)})" if others else ""
            raise InputError(
                f"{self.gold_path}: {problems[0]}{more}; no score: {self._gold_fix(gold)}"
            )
        if self.listed is not None and self.listed < len(gold):
            unlisted = len(gold) - self.listed
            warn(
                f"{self.gold_path} lists no link for the last {unlisted:,} of the {len(gold):,} "
                f"pairs (from pair {self.listed + 1:,} on): they count as pairs without gold "
                "links; check that the file is whole"
            )
        score = score_alignments(self.predicted, gold)
        if self._fits_swapped(gold):  # no link tells the direction: do the scores?
            swapped = [GoldAlignment(_swap(g.sure), _swap(g.possible)) for g in gold]
            other = score_alignments(self.predicted, swapped)
            if other.aer < score.aer:
                warn(
                    f"{self.gold_path}: read the other way round (target-source links) every "
                    f"gold link fits too, and the AER is {other.aer * 100:.2f}% against "
                    f"{score.aer * 100:.2f}%: check the file's direction (if it lists target-"
                    "source links, swap each i-j to j-i, or align in its direction)"
                )
        return score

    def _report(self, score, pairs: int) -> None:
        nulls = getattr(self.gold, "nulls", 0)  # a NAACL file's links to NULL
        left_out = f"; {nulls:,} gold link{'s' * (nulls != 1)} to NULL left out" if nulls else ""
        console = stderr_console()
        console.print(
            f"AER {score.aer * 100:.2f}%  precision {score.precision * 100:.2f}%  "
            f"recall {score.recall * 100:.2f}%  ({score.predicted:,} links predicted, "
            f"{score.sure:,} sure gold links, {pairs:,} pairs{left_out})"
        )
        if self.score_json is not None:
            from nmt_cli.atomic import write_text

            record = {
                "gold": str(self.gold_path),
                "pairs": pairs,
                "aer": score.aer,
                "precision": score.precision,
                "recall": score.recall,
                "predicted_links": score.predicted,
                "sure_gold_links": score.sure,
                "sure_hits": score.sure_hits,  # predicted links that are sure gold links
                "possible_hits": score.possible_hits,  # ... that are gold links (sure or not)
                "gold_links_to_null_left_out": nulls,
            }
            write_text(self.score_json, json.dumps(record, indent=1) + "\n")


def _alignments(count: int) -> str:
    return f"{count:,} alignment{'' if count == 1 else 's'}"


def _real(words: list[str]) -> int:
    """How many words a gold link may point at: the pseudo-word </s> (--include-eos) is none."""
    from nmt_cli.alignment import EOS_WORD

    return len(words) - (words[-1:] == [EOS_WORD])


def _without_trailing_empty(gold: list, pairs: int) -> list:
    """The gold list without its last entry when that one is empty and one more than `pairs`:
    an editor's extra newline at the end of a gold file is not a pair. (More empty entries
    may be pairs without links: their count must fit, as any other.)"""
    if len(gold) == pairs + 1 and not gold[-1].possible:
        return gold[:pairs]
    return gold


def _swap(links) -> frozenset:
    """Links i-j read as j-i."""
    return frozenset((j, i) for i, j in links)
