"""Keep llama.cpp's own converter (``convert_hf_to_gguf.py``, its ``conversion`` package and its ``gguf-py``) from
the llama-cpp-python source distribution of the installed version, for the tests and evidence that convert tiny
transformers models to GGUF the way a user does.

The files go to ``$ROPEKIT_CACHE_DIR/llama.cpp-<version>/`` (default ``~/.cache/ropekit``); the tests look there
(``tests/helpers/llamacpp_convert.py``) and skip, naming this command, where they are missing. Only the converter's
Python files are extracted; nothing is built or installed. Exit status 0 on success, 1 when the download failed.

    python tools/fetch_llama_cpp_converter.py [--version 0.3.36] [--sdist PATH]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: what the converter needs beside itself, inside the source distribution's ``vendor/llama.cpp``
PARTS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")


def converter_dir(version: str) -> Path:
    base = Path(os.environ.get("ROPEKIT_CACHE_DIR") or Path.home() / ".cache" / "ropekit")
    return base / f"llama.cpp-{version}"


def extract(sdist: Path, folder: Path) -> None:
    """The converter's files from ``sdist`` into ``folder`` (written beside it, renamed in when complete)."""
    partial = folder.with_name(folder.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            _, _, inside = member.name.partition("/vendor/llama.cpp/")
            if inside and member.isfile() and any(inside == p or inside.startswith(p) for p in PARTS):
                member.name = inside
                archive.extract(member, partial, filter="data")
    if not (partial / PARTS[0]).is_file():
        raise SystemExit(f"fetch_llama_cpp_converter: {sdist.name} holds no vendor/llama.cpp/{PARTS[0]}")
    partial.replace(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", help="llama-cpp-python's version (default: the installed one)")
    parser.add_argument("--sdist", type=Path, help="a downloaded llama_cpp_python-VERSION.tar.gz (default: download)")
    opts = parser.parse_args(argv)
    version = opts.version or importlib.metadata.version("llama-cpp-python")
    folder = converter_dir(version)
    if (folder / PARTS[0]).is_file():
        print(f"fetch_llama_cpp_converter: {folder} is there")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        sdist = opts.sdist
        if sdist is None:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                   f"llama-cpp-python=={version}", "-d", tmp]  # fmt: skip
            if subprocess.run(cmd, check=False).returncode != 0:
                print("fetch_llama_cpp_converter: the download failed", file=sys.stderr)
                return 1
            sdist = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        extract(sdist, folder)
    print(f"fetch_llama_cpp_converter: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
