"""Write ``plans_before_layering.json``: the plan JSON of every shipped profile x VARIANTS.

The snapshot is made by glm-kv itself: it is a regression guard (test_plan_unchanged.py), never a
source of expected values; those come from the article, SGLang 0.5.23 and public boot logs.

The file was first written by the engine as it stood before the layering move (issue 9). A later
change that alters numbers on purpose re-captures it with ``python tests/ledgers/capture_plans.py``,
which prints every entry that changed; the commit says why each changed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan_unchanged import BEFORE, VARIANTS  # noqa: E402

from glm_kv import ProfileError, build_plan, shipped_profiles  # noqa: E402

OUT = Path(__file__).resolve().parent / "plans_before_layering.json"


def capture() -> dict:
    out = {}
    for p in shipped_profiles():
        for name, ov in VARIANTS.items():
            try:
                out[f"{p}/{name}"] = build_plan(p, ov)
            except ProfileError as e:
                out[f"{p}/{name}"] = {"error": str(e)}
    return out


if __name__ == "__main__":
    new = capture()
    changed = sorted(k for k in new if BEFORE.get(k) != new[k])
    OUT.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(changed)} of {len(new)} entries changed" + (":\n  " + "\n  ".join(changed) if changed else ""))
