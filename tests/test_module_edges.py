"""The module edges docs/architecture.md promises, checked on the sources:
the lower layers never include the ones built on them (a backend's kernels
know no KV store and no model; tensor/ knows no backend). Tests are exempt:
they may reach up to build their inputs."""
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)

# module -> the modules its non-test sources may include
ALLOWED = {
    "util": {"util"},
    "tensor": {"util", "tensor"},
    "ops": {"util", "tensor", "ops"},
    "backend": {"util", "tensor", "ops", "backend"},
    "kv": {"util", "tensor", "ops", "backend", "kv"},
}


def includes(module):
    for path in sorted((SRC / module).rglob("*")):
        if path.suffix not in {".h", ".cpp", ".cu", ".cuh"} or "tests" in path.relative_to(SRC).parts:
            continue
        for m in INCLUDE.finditer(path.read_text(errors="replace")):
            yield path.relative_to(SRC), m.group(1)


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_module_includes_only_what_is_below_it(module):
    seen = list(includes(module))
    assert seen, f"no sources found under src/{module}"
    wrong = [f"{p}: {m}/" for p, m in seen if m not in ALLOWED[module]]
    assert not wrong, f"src/{module} reaches above itself:\n" + "\n".join(wrong)


def test_the_checker_sees_a_bad_edge(tmp_path):
    # The pattern must match the include forms the tree uses.
    text = '#include "kv/paged.h"\n  #  include "models/model.h"\n#include <vector>\n'
    assert [m.group(1) for m in INCLUDE.finditer(text)] == ["kv", "models"]
