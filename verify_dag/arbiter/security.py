"""The security verdict arm (rubric item 5), from the bundle's security_status and the plan's
security_required (default false):

==============  ===========================================================  ================
arm             when                                                         consequence
==============  ===========================================================  ================
failed          a strict security gate failed                                blocker: REJECTED
advisory        only advisory gates reported findings                        medium concern
passed          every configured security gate passed                        none
unavailable     no gate ran (none configured, blocked, or no                 high concern,
                security_status) and the plan sets security_required: true  AUDIT_UNAVAILABLE
not_applicable  no gate ran and the plan does not require security           reason recorded
==============  ===========================================================  ================

``passed`` is only ever said of gates that ran and passed: a plan that does not require security
gets ``not_applicable`` when nothing ran, never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verify_dag.arbiter.concerns import Concerns


def arm(
    bundle: Mapping[str, Any] | None, plan: Mapping[str, Any] | None, concerns: Concerns
) -> dict[str, Any]:
    required = bool(plan.get("security_required", False)) if plan is not None else False
    status = bundle.get("security_status") if bundle is not None else None
    said = status.get("status") if isinstance(status, Mapping) else None
    why = (
        str(status.get("reason", ""))
        if isinstance(status, Mapping)
        else (
            "the bundle carries no security_status"
            if bundle is not None
            else "the bundle could not be used"
        )
    )
    out = {"security_required": required}
    if said == "failed":
        concerns.add("blocker", f"security failed: {why}")
        return {**out, "status": "failed", "reason": why}
    if said == "advisory":
        concerns.add("medium", f"security gates ran in advisory mode and reported findings: {why}")
        return {**out, "status": "advisory", "reason": why}
    if said == "passed":
        return {**out, "status": "passed", "reason": why}
    if required:
        concerns.add("high", f"security evidence unavailable and the plan requires it: {why}")
        return {**out, "status": "unavailable", "reason": why}
    declared = plan is not None and "security_required" in plan
    rule = "security_required: false" if declared else "no security_required (default false)"
    return {**out, "status": "not_applicable", "reason": f"the plan declares {rule}; {why}"}
