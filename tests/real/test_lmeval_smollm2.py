"""lm-eval's ``hf`` backend on ropekit's samples for SmolLM2-135M (its GGUF dequantised to a transformers folder,
tokenizer included): lm-eval's scores equal ropekit's own run on the same samples, and ``effective-length`` on its
output gives ropekit's table. Every task is exported: with SmolLM2's byte-level BPE tokenizer every sample's text
re-tokenises to ropekit's ids (the export checks it)."""

from __future__ import annotations

import json

import pytest

from helpers.lmeval_run import assert_same_as_ropekit, cli, run_lm_eval
from ropekit.synthetic.suite import TASKS as SUITE

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.usefixtures("quiet_transformers")]
pytest.importorskip("lm_eval")

TASKS = tuple(SUITE)  # every task
LENGTHS = (256, 512)


@pytest.fixture(scope="module")
def smollm2_folder(smollm2_path, tmp_path_factory):
    """SmolLM2 as a transformers folder: the GGUF dequantised (float32) by ropekit's loader, with its tokenizer."""
    from ropekit.integrations.hf.load import load_model

    folder = tmp_path_factory.mktemp("smollm2") / "model"
    model, tokenizer = load_model(smollm2_path)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("quantization_config", None)  # the GGUF loading options: the saved weights are plain float32
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def test_lm_eval_scores_on_smollm2_equal_ropekits(smollm2_folder, tmp_path):
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.tasks.run import TaskSettings, run_tasks

    lengths = ",".join(map(str, LENGTHS))
    folder = tmp_path / "tasks"
    written = cli("eval", "tasks", "--model", smollm2_folder, "--tasks", ",".join(TASKS), "--lengths", lengths,
                  "--samples", "2", "--write-lm-eval", folder)  # fmt: skip
    assert written.exit_code == 0, written.output
    own = run_tasks(
        HFEvalModel(smollm2_folder), TaskSettings(methods=("none",), tasks=TASKS, lengths=LENGTHS, samples=2)
    )
    results = run_lm_eval(smollm2_folder, folder, tmp_path / "out", ["ropekit"])
    assert_same_as_ropekit(results, tmp_path / "out", own)
