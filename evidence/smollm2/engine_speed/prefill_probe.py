"""llama.cpp's prefill of SmolLM2's Q4_1 file under several settings, in one process: ``N`` random token ids (numpy
seed 0, ids 100-39999) fed in ``n_batch`` chunks with no logits but the last, timed wall-clock and in CPU seconds
(every thread of the process). Settings: flash attention on/off, n_batch (= n_ubatch), the key/value cache type.

PYTHONPATH=src nice -n 19 python evidence/smollm2/engine_speed/prefill_probe.py GGUF N THREADS SETTING...
with SETTING as ``fa=on,batch=2048,kv=f16`` (kv: f16 or f32).
"""

from __future__ import annotations

import sys
import time

import llama_cpp
import numpy as np

KV = {"f16": 1, "f32": 0}  # ggml type ids


def main() -> None:
    path, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    toks = [int(t) for t in np.random.default_rng(0).integers(100, 40000, n)]
    for spec in sys.argv[4:]:
        s = dict(part.split("=") for part in spec.split(","))
        fa, nb, kv = s.get("fa", "off") == "on", int(s.get("batch", 512)), KV[s.get("kv", "f16")]
        llm = llama_cpp.Llama(
            path, n_ctx=n + 512, n_batch=nb, n_ubatch=nb, n_threads=threads, n_threads_batch=threads,
            flash_attn=fa, type_k=kv, type_v=kv, verbose=False,
        )  # fmt: skip
        wall, cpu = time.perf_counter(), time.process_time()
        for start in range(0, n, nb):
            llm._batch.set_batch(batch=toks[start : start + nb], n_past=start, logits_all=False)
            llm._ctx.decode(llm._batch)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"threads={threads} {spec} n={n}: wall {wall:.1f} s cpu {cpu:.1f} s", flush=True)
        llm.close()


if __name__ == "__main__":
    main()
