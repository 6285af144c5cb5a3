"""The scores of run.sh's runs side by side: lm-eval's own (its results file) with the prompts sent as ids and as
text, ``effective-length`` of the ids run's samples, ``--engine llamacpp`` and ``--engine openai``; and the prompts
whose text llama.cpp's tokenizer reads otherwise than transformers' (the ids the export checked). With PENALTY=1,
how many answers the server's default repeat penalty changes. Usage: ``python table.py OUT GGUF``."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def lm_eval_scores(folder: Path) -> dict[tuple[str, int], float]:
    results = json.loads(max(folder.rglob("results_*.json")).read_text())["results"]
    return {
        (task.removeprefix("ropekit_"), int(key.split(",")[0])): value
        for task, metrics in results.items()
        if task.startswith("ropekit_")
        for key, value in metrics.items()
        if key.split(",")[0].isdigit() and value != -1
    }


def rows(path: Path) -> dict[tuple[str, int], dict]:
    return {(r["task"], r["length"]): r for r in json.loads(path.read_text())["rows"]}


def answers(folder: Path) -> dict[tuple[str, int, int, int], str]:
    found = {}
    for file in folder.rglob("samples_*.jsonl"):
        for line in file.read_text().splitlines():
            record = json.loads(line)
            doc = record["doc"]
            found[doc["ropekit_task"], doc["max_length"], doc["sample"], doc["question"]] = record["filtered_resps"][0]
    return found


def read_otherwise(out: Path, gguf: str) -> list[tuple[str, int, int]]:
    """The prompts whose text llama.cpp's tokenizer reads as other ids than the folder's tokenizer."""
    from llama_cpp import Llama
    from transformers import AutoTokenizer

    vocab = Llama(gguf, vocab_only=True, verbose=False)
    tokenizer = AutoTokenizer.from_pretrained(out / "tasks" / "tokenizer")
    found = []
    for line in (out / "tasks" / "samples.jsonl").read_text().splitlines():
        doc = json.loads(line)
        ids = tokenizer(doc["input"], add_special_tokens=False)["input_ids"]
        if vocab.tokenize(doc["input"].encode(), add_bos=False, special=True) != ids:
            found.append((doc["ropekit_task"], doc["max_length"], doc["sample"]))
    return found


def main(out: Path, gguf: str) -> None:
    ids, text = lm_eval_scores(out / "lmeval"), lm_eval_scores(out / "lmeval_text")
    penalty = lm_eval_scores(out / "lmeval_penalty") if (out / "lmeval_penalty").is_dir() else None
    table, llamacpp, openai = rows(out / "effective.txt"), rows(out / "llamacpp.txt"), rows(out / "openai.txt")
    print("| task | length | lm-eval, ids | `effective-length` of it | `--engine llamacpp` | `--engine openai` | "
          "lm-eval, text |" + (" lm-eval, text, default repeat penalty |" if penalty else ""))  # fmt: skip
    print("|---|---:|---:|---|---:|---:|---:|" + ("---:|" if penalty else ""))
    for key in sorted(llamacpp, key=lambda k: (k[1], list(llamacpp).index(k))):
        r = table[key]
        low, high = r["ci95"]
        print(f"| {key[0]} | {key[1]} | {ids[key]:.4f} | {r['score']:.1%} [{low:.0%}, {high:.0%}] ({r['samples']}) "
              f"| {llamacpp[key]['score']:.1%} | {openai[key]['score']:.1%} | {text[key]:.4f} |"
              + (f" {penalty[key]:.4f} |" if penalty else ""))  # fmt: skip
    same = all(
        max(abs(ids[k] - r["score"]), abs(table[k]["score"] - r["score"]), abs(openai[k]["score"] - r["score"])) < 1e-12
        for k, r in llamacpp.items()
    )
    print(f"\nlm-eval (ids), effective-length, --engine llamacpp and --engine openai equal on every row: {same}")
    otherwise = read_otherwise(out, gguf)
    by_ids, by_text = answers(out / "lmeval"), answers(out / "lmeval_text")
    parted = [k for k in by_ids if by_ids[k] != by_text[k]]
    print(f"prompts whose text llama.cpp's tokenizer reads otherwise: {len(otherwise)} of {len(by_ids)} "
          f"({', '.join(f'{t} {n} #{s}' for t, n, s in otherwise) or 'none'}); answers that differ between the ids "
          f"and the text run: {len(parted)} ({', '.join(f'{t} {n} #{s}' for t, n, s, _ in parted) or 'none'})")  # fmt: skip
    if penalty:
        penalised = answers(out / "lmeval_penalty")
        changed = sum(by_text[k] != penalised[k] for k in by_text)
        print(f"answers that the server's default repeat penalty changes: {changed} of {len(by_text)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
