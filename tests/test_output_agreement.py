"""Timeline output agreement, per output (issue 17 item 8): one absolute tolerance over every
output said "Outputs differ, max |diff| 3.03" for a detector whose boxes are hundreds of pixels
wide; each output is now judged on its own scale, with the relative error, the cosine similarity,
and top-1 / top-5 agreement shown for class scores."""

from __future__ import annotations

import numpy as np

from dashboard.timeline.model import output_text
from dashboard.timeline.runner import _compare, output_agreement

RNG = np.random.default_rng(7)


def pairs_of(served, reference):
    return [([a], [b]) for a, b in zip(served, reference)]


def test_boxes_in_pixels_agree_on_their_own_scale_while_scores_are_judged_on_theirs():
    boxes = RNG.uniform(0, 640, (4, 100, 4)).astype(np.float32)
    drifted = boxes + RNG.normal(0, 1.0, boxes.shape).astype(np.float32)  # fp16-like drift, up to ~3-4 px
    pairs = [([d], [b]) for d, b in zip(drifted, boxes)]
    elementwise = np.all(np.abs(drifted - boxes) <= 1e-2 + 1e-2 * np.abs(boxes))
    assert not elementwise  # the old single-tolerance check said "differ"
    (row,) = output_agreement(pairs, 1e-2, 1e-2, ["boxes"])
    assert row["name"] == "boxes" and row["shape"] == [100, 4]
    assert row["rel_error"] < 1e-2 and row["cosine"] > 0.999 and row["agree"] is True
    assert row["top1"] is None  # a last axis of 4 is coordinates, not classes


def test_a_changed_output_differs_even_when_the_others_agree():
    scores = RNG.uniform(0, 1, (3, 8, 20)).astype(np.float32)
    boxes = RNG.uniform(0, 300, (3, 8, 4)).astype(np.float32)
    pairs = [([b, s[..., ::-1].copy()], [b, s]) for b, s in zip(boxes, scores)]  # the classes reversed
    result = _compare(pairs, 1e-2, 1e-2, ["boxes", "scores"])
    rows = {r["name"]: r for r in result["outputs"]}
    assert rows["boxes"]["agree"] and not rows["scores"]["agree"] and result["agree"] is False
    assert rows["scores"]["top1"] < 0.5 and rows["scores"]["topk"] < 1.0  # shown for class scores
    assert "DIFFERS" in output_text(rows["scores"]) and "top-1 match" in output_text(rows["scores"])


def test_logits_that_rank_alike_show_full_top1_agreement():
    logits = RNG.normal(0, 5, (2, 1, 1000)).astype(np.float32)
    nudged = logits + RNG.normal(0, 1e-3, logits.shape).astype(np.float32)
    (row,) = output_agreement(pairs_of(nudged, logits), 1e-2, 1e-2, ["logits"])
    assert row["agree"] and row["top1"] == 1.0 and row["topk"] == 1.0


def test_integers_must_match_and_shapes_must_agree():
    ids = np.arange(12, dtype=np.int64).reshape(3, 4)
    other = ids.copy()
    other[0, 0] = 99
    same, changed = (output_agreement(pairs_of([x], [ids]), 1e-2, 1e-2)[0] for x in (ids, other))
    assert same["agree"] and not changed["agree"] and same["name"] == "output 0"
    (wrong,) = output_agreement(pairs_of([np.zeros((2, 2), np.float32)], [np.zeros((3, 2), np.float32)]), 1e-2, 1e-2)
    assert wrong["agree"] is False and wrong["why"] == "shapes differ"


def test_nothing_compared_has_no_verdict():
    assert _compare([], 1e-2, 1e-2, ["y"]) == {"compared": 0, "max_abs_diff": 0.0, "agree": None, "outputs": []}
