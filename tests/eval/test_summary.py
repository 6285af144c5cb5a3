"""The report's summary table and verdict on hand-made results, where the right answer is known by construction."""

from __future__ import annotations

from ropekit.eval.summary import summary_table, verdict

PPL = [
    {"method": m, "length": n, "perplexity": v}
    for m, vals in {"none": (3.0, 30.0), "yarn": (3.0, 4.0), "ntk": (3.0, 5.0)}.items()
    for n, v in zip((256, 512), vals, strict=True)
]
KEY = [
    {"method": "none", "length": 512, "accuracy": 0.0},
    {"method": "yarn", "length": 512, "accuracy": 1.0},
    {"method": "yarn", "length": 512, "accuracy": 0.5},
    {"method": "ntk", "length": 512, "accuracy": 0.5},
]


def _effective(method: str, value: int | None, interval: list, relative: int | None, rel_interval: list) -> dict:
    return {
        "method": method,
        "subset": "all",
        "effective_length": value,
        "interval": interval,
        "relative_effective_length": relative,
        "relative_interval": rel_interval,
    }


def test_table_has_one_row_per_method_and_the_longest_length_values() -> None:
    columns, rows = summary_table(PPL, KEY, None)
    assert columns == ["method", "perplexity at 512", "passkey at 512"]
    assert rows == [
        {"method": "none", "perplexity at 512": "30", "passkey at 512": "0%"},
        {"method": "yarn", "perplexity at 512": "4", "passkey at 512": "75%"},  # mean of the two cells
        {"method": "ntk", "perplexity at 512": "5", "passkey at 512": "50%"},
    ]


def test_verdict_from_tasks_says_by_how_much_and_whether_intervals_separate() -> None:
    separated = {
        "effective": [
            _effective("none", 256, [256, 256], 256, [256, 256]),
            _effective("yarn", 1024, [1024, 1024], 1024, [1024, 2048]),
            _effective("yarn", 0, [0, 0], 0, [0, 0]) | {"subset": "learned"},  # other subsets are ignored
        ]
    }
    line = verdict(PPL, KEY, separated, 256)
    assert line.startswith("yarn keeps the longest relative effective length on the tasks: 1,024 tokens (4× ")
    assert "4× the next best, none (256)" in line and "intervals separate them" in line
    overlapping = {
        "effective": [
            _effective("none", 256, [256, 256], 512, [256, 1024]),
            _effective("yarn", 1024, [512, 1024], 1024, [512, 1024]),
        ]
    }
    assert "overlap" in verdict(PPL, KEY, overlapping, 256)
    _, rows = summary_table(PPL, KEY, overlapping)
    assert rows[1]["relative effective length (tasks)"] == "1,024 [512, 1,024]"
    assert rows[0]["effective length (tasks)"] == "256"


def test_verdict_falls_back_to_passkey_then_perplexity() -> None:
    assert verdict(PPL, KEY, None, 256) == "On passkey at 512 tokens yarn scores highest (75%); next ntk (50%)."
    assert verdict(PPL, [], None, 256) == (
        "At 512 tokens yarn has the lowest perplexity (4); next ntk (5, 1.25× higher)."
    )
    assert verdict([], [], None, 256) == "No method was evaluated."


def test_the_verdict_names_every_method_tied_for_second() -> None:
    tied = {
        "effective": [
            _effective("none", 256, [256, 256], 256, [256, 256]),
            _effective("yarn", 256, [256, 256], 256, [256, 512]),
            _effective("self_extend", 512, [256, 512], 512, [512, 1024]),
        ]
    }
    line = verdict(PPL, KEY, tied, 256)
    assert "2× the next best, none, yarn (256)" in line
    assert "overlap" in line  # self_extend's lower end (512) does not clear yarn's upper end (512)
