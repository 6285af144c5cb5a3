"""The launch lines ``extend``, ``plan`` and ``engines`` print (``ropekit.engines.launch``) run what was written.

Each line is parsed as a shell would (``shlex``), and checked against an independent oracle: the written
config.json (vLLM's and SGLang's override), the target length, the llama.cpp flags ``extend`` and ``plan`` derive
from the method itself (a different route from the written config), the GGUF file's metadata read back with the
``gguf`` package, and transformers' own RoPE functions on the override (``plan``: the frequencies the plan shows).
"""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.engines.launch import LAUNCH_ENGINES, launch_lines

pytest.importorskip("transformers")
runner = CliRunner()
L0, TARGET = 64, 256  # the tiny Llama's original length, extended 4 times
#: extend's method flags, by method
METHODS = {
    "none": ["--scaling", "none", "--target-length", str(TARGET)],
    "linear": ["--scaling", "linear", "--factor", "4"],
    "ntk": ["--scaling", "ntk", "--factor", "4"],
    "dynamic": ["--scaling", "dynamic", "--factor", "4"],
    "yarn": ["--scaling", "yarn", "--factor", "4"],
    "yarn-attention": ["--scaling", "yarn", "--factor", "4", "--param", "attention_factor=1.3"],
    "yarn-paper": ["--scaling", "yarn", "--factor", "4", "--ramp", "paper"],
    "llama3": ["--scaling", "llama3", "--factor", "4"],
    "base": ["--base", "500000", "--target-length", str(TARGET)],
}


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _override(line: dict, flag: str) -> dict:
    return json.loads(_value(shlex.split(line["command"]), flag))


def check_served(launch: dict, target: int, rope: dict, length: int, served: str) -> None:
    """vLLM's and SGLang's lines serve ``served`` with exactly ``rope`` and ``length`` at ``target`` tokens."""
    vllm = shlex.split(launch["vLLM"]["command"])
    assert vllm[:3] == ["vllm", "serve", served]
    assert _override(launch["vLLM"], "--hf-overrides") == {"rope_parameters": rope, "max_position_embeddings": length}
    assert int(_value(vllm, "--max-model-len")) == target
    sglang = shlex.split(launch["SGLang"]["command"])
    assert sglang[:3] == ["python", "-m", "sglang.launch_server"] and _value(sglang, "--model-path") == served
    assert _override(launch["SGLang"], "--json-model-override-args") == _override(launch["vLLM"], "--hf-overrides")
    assert int(_value(sglang, "--context-length")) == target


def flags_of(command: str, gguf: str, target: int) -> list[str]:
    """The RoPE flags of a ``llama-server -m GGUF -c TARGET FLAGS`` line."""
    argv = shlex.split(command)
    assert argv[:5] == ["llama-server", "-m", gguf, "-c", str(target)]
    return argv[5:]


@pytest.mark.parametrize("method", list(METHODS))
def test_extend_json_launch_lines_run_the_written_config(method: str, llama_dir, tmp_path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["extend", "--model", str(llama_dir), *METHODS[method], "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary, config = json.loads(result.stdout), json.loads((out / "config.json").read_text())
    launch = summary["launch"]
    assert list(launch) == list(LAUNCH_ENGINES)
    check_served(launch, TARGET, config["rope_parameters"], config["max_position_embeddings"], str(out))
    assert launch["transformers"]["command"] == f"AutoModelForCausalLM.from_pretrained({str(out)!r})"
    assert shlex.split(launch["MLX-LM"]["command"]) == ["mlx_lm.server", "--model", str(out)]
    assert launch["MLX-LM"]["note"] is None  # extend wrote rope_theta/rope_scaling, which MLX-LM reads
    llama = launch["llama.cpp"]
    if method == "dynamic":  # follows the length: no llama.cpp form, and no Ollama line
        assert llama["command"] is None and "dynamic cannot be expressed" in llama["note"]
        assert launch["Ollama"]["command"] is None
    elif summary["llamacpp_flags"] is not None:
        assert flags_of(llama["command"], "MODEL.gguf", TARGET) == summary["llamacpp_flags"]
        assert f"ropekit extend --model MODEL.gguf {shlex.join(METHODS[method])} --out OUT.gguf" in llama["alternative"]
    else:  # per-pair factors: only a GGUF written by extend carries them
        write, serve = llama["command"].split(" && ")
        assert write == f"ropekit extend --model MODEL.gguf {shlex.join(METHODS[method])} --out OUT.gguf"
        assert shlex.split(serve) == ["llama-server", "-m", "OUT.gguf", "-c", str(TARGET)]
        assert llama["note"].startswith("no llama.cpp flags")


def test_extend_prints_the_launch_lines(llama_dir, tmp_path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["extend", "--model", str(llama_dir), *METHODS["yarn"], "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index(f"  launch it at {TARGET:,} tokens:")
    engines = [line.split()[0] for line in lines[start + 1 :] if not line.startswith(" " * 17)]
    assert engines == list(LAUNCH_ENGINES)
    assert any(line.strip().startswith(f"vLLM         vllm serve {out} --hf-overrides") for line in lines)


def test_gguf_out_launch_lines_match_the_file(tmp_path) -> None:
    pytest.importorskip("gguf")
    from helpers.gguf_files import BASE, L0, fields, write_source

    source, out = write_source(tmp_path / "in.gguf"), tmp_path / "out.gguf"
    method = ["--scaling", "yarn", "--factor", "2"]
    result = runner.invoke(app, ["extend", "--model", str(source), *method, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary, written = json.loads(result.stdout), fields(out)
    launch, target = summary["launch"], 2 * L0
    assert written["llama.context_length"] == target
    llama = launch["llama.cpp"]
    assert shlex.split(llama["command"]) == ["llama-server", "-m", str(out), "-c", str(target)]
    assert flags_of(llama["alternative"], str(source), target) == summary["llamacpp_flags"]
    rope = _override(launch["vLLM"], "--hf-overrides")["rope_parameters"]
    assert (rope["rope_type"], rope["factor"]) == (
        written["llama.rope.scaling.type"],
        written["llama.rope.scaling.factor"],
    )
    assert rope["original_max_position_embeddings"] == written["llama.rope.scaling.original_context_length"] == L0
    assert rope["rope_theta"] == BASE == pytest.approx(written["llama.rope.freq_base"])
    check_served(launch, target, rope, target, "MODEL_FOLDER")
    ollama = shlex.split(launch["Ollama"]["command"])
    assert ollama[:4] == ["printf", "FROM %s\\nPARAMETER num_ctx %s\\n", str(out), str(target)]
    assert ollama[-5:] == ["ollama", "create", "NAME", "-f", "Modelfile"]


def _transformers_rope(override: dict, head_dim: int) -> tuple[np.ndarray, float]:
    """transformers' own inverse frequencies and attention factor for an override (its RoPE functions)."""
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = transformers.LlamaConfig(
        head_dim=head_dim, hidden_size=2 * head_dim, num_attention_heads=2, **json.loads(json.dumps(override))
    )
    params = config.rope_parameters
    if params["rope_type"] == "default":
        return 1.0 / params["rope_theta"] ** (np.arange(0, head_dim, 2) / head_dim), 1.0
    inv, attention = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, device="cpu")
    return inv.double().numpy(), float(attention)


def test_plan_json_gives_each_methods_launch_lines() -> None:
    base, train, target = 100000.0, 8192, 32768
    args = ["--head-dim", "64", "--base", f"{base:g}", "--original-length", "8k", "--target-length", "32k", "--json"]
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert set(plan["launch"]) == {method["name"] for method in plan["methods"]}
    assert plan["launch_method"] in plan["launch"]
    plain = 1.0 / base ** (np.arange(0, 64, 2) / 64)
    for method in plan["methods"]:
        launch = plan["launch"][method["name"]]
        override = _override(launch["vLLM"], "--hf-overrides")
        check_served(launch, target, override["rope_parameters"], override["max_position_embeddings"], "MODEL")
        inv, attention = _transformers_rope(override, 64)
        np.testing.assert_allclose(inv / plain, method["ratio"], rtol=1e-6)  # transformers: float32
        assert attention == pytest.approx(method["attention_factor"], rel=1e-9)
        flags = plan["llamacpp_flags"][method["name"]]
        if flags is not None:
            assert flags_of(launch["llama.cpp"]["command"], "MODEL.gguf", target) == flags
        flags_text = f"--scaling {method['name']} --original-length {train} --target-length {target}"
        assert f"ropekit extend --model MODEL {flags_text} --out OUT" in launch["transformers"]["note"]


def test_plan_text_prints_the_chosen_methods_lines() -> None:
    args = ["--head-dim", "64", "--base", "100000", "--original-length", "8k", "--target-length", "32k"]
    result = runner.invoke(app, ["plan", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Launch lines for yarn at 32,768 tokens" in result.stdout
    assert "  vLLM         vllm serve MODEL --hf-overrides" in result.stdout


def test_engines_prints_lines_for_the_files_the_user_writes(llama_dir) -> None:
    args = ["engines", "--model", str(llama_dir), *METHODS["yarn"], "--engines", "SGLang,Ollama", "--logits", "0"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert "ropekit-engines-" not in result.stdout  # not the temporary folder the comparison ran on
    assert (
        summary["launch"]["transformers"]["note"]
        == f"OUT: ropekit extend --model {llama_dir} --scaling yarn --factor 4 --out OUT"
    )
    assert [row["launch"] for row in summary["engines"]] == [
        launch_lines_text(summary["launch"][name]) for name in ("SGLang", "Ollama")
    ]
    assert shlex.split(summary["launch"]["vLLM"]["command"])[:3] == ["vllm", "serve", str(llama_dir)]


def test_engines_on_an_extend_output_gives_its_own_lines(llama_dir, tmp_path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["extend", "--model", str(llama_dir), *METHODS["llama3"], "-o", str(out)]).exit_code == 0
    result = runner.invoke(app, ["engines", "--model", str(out), "--engines", "SGLang", "--logits", "0", "--json"])
    assert result.exit_code == 0, result.output
    summary, config = json.loads(result.stdout), json.loads((out / "config.json").read_text())
    check_served(summary["launch"], TARGET, config["rope_parameters"], config["max_position_embeddings"], str(out))
    assert summary["engines"][0]["launch"] == launch_lines_text(summary["launch"]["SGLang"])


def launch_lines_text(line: dict) -> str:
    from ropekit.engines.launch import Launch

    return Launch("", line["command"], line["alternative"], line["note"]).text()


def test_without_a_transformers_form_only_the_gguf_lines_remain() -> None:
    lines = launch_lines(None, 1024, gguf="out.gguf", why_no_config="no transformers form: interleaved pairs")
    assert all(lines[name].command is None for name in ("transformers", "vLLM", "SGLang", "MLX-LM"))
    assert lines["MLX-LM"].note == "no transformers form: interleaved pairs"
    assert lines["llama.cpp"].command == "llama-server -m out.gguf -c 1024"
