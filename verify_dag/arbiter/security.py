"""The security verdict arm (rubric item 5), from the bundle's security_status and the plan's
security_required flag:

==============  ===========================================================  ================
arm             when                                                         consequence
==============  ===========================================================  ================
failed          a strict security gate failed                                blocker: REJECTED
advisory        only advisory gates reported findings                        medium concern
passed          every configured security gate passed, or no gate gave a     none
                result and the plan does not declare security_required: true
unavailable     no gate gave a result (none configured, blocked, or no       high concern,
                security_status) and the plan sets security_required: true  AUDIT_UNAVAILABLE
not_applicable  no gate gave a result and the plan sets security_required:   reason recorded
                false explicitly
==============  ===========================================================  ================

Gates that ran decide first, whatever the plan says: a failed strict gate is never excused by a
plan that does not require security. Only when no gate gave a result does the flag decide, and
there the specification tells an absent flag (the v1.0 plans written before it existed: passed,
for backwards compatibility) from an explicit false (not_applicable). The reason then says that
no gate ran, so a ``passed`` of the absent flag cannot be read as gates that passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verify_dag.arbiter.concerns import Concerns


def arm(
    bundle: Mapping[str, Any] | None, plan: Mapping[str, Any] | None, concerns: Concerns
) -> dict[str, Any]:
    # The plan schema makes the flag a boolean; None is "not declared" (or no usable plan).
    declared = plan.get("security_required") if plan is not None else None
    required = declared is True
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
    if declared is False:
        return {
            **out,
            "status": "not_applicable",
            "reason": f"the plan sets security_required: false, so security is out of its "
            f"scope; no gate gave a result: {why}",
        }
    plan_said = (
        "the plan does not declare security_required: true (default false)"
        if plan is not None
        else "the plan could not be used (a blocker), so it declares no security_required: true"
    )
    return {
        **out,
        "status": "passed",
        "reason": f"{plan_said}: no security evidence is required; no gate gave a result: {why}",
    }
