"""A small evaluator of AWS IAM and Alibaba Cloud RAM identity policies, for checking
the deployer policies.

Neither moto (5.2.5: no SimulateCustomPolicy/SimulatePrincipalPolicy; its enforcement
ignores Resource patterns in conditions and knows only StringEquals, and denies on an
unmet Allow condition) nor anything else installable here evaluates IAM conditions, so
this implements the documented evaluation logic for what our policies use:

* an explicit Deny wins, else any Allow, else the implicit deny;
* Action/NotAction and Resource/NotResource with ``*``/``?`` wildcards (actions
  case-insensitively);
* a statement applies only if every condition operator in it holds, and an operator
  holds only if every key in it holds (AND), any of a key's values matching (OR);
* operators: StringEquals, StringNotEquals, StringLike, StringNotLike, ArnEquals,
  ArnLike, ArnNotEquals, ArnNotLike, Bool, Null, each with ``...IfExists``; the set
  prefixes ``ForAllValues:`` (true when the key is absent) and ``ForAnyValue:``
  (false when absent); a non-negated operator on an absent key is false, a negated
  one (``...Not...``) true;
* a permissions boundary: the effective permission is allowed only if both the
  identity policy and the boundary allow it (and neither denies).

RAM policies (``"Version": "1"``) have the same shape and, for what terraform/alibaba's
policy uses, the same documented rules (RAM "Policy elements" and "Conditional
operators": a Deny wins over an Allow; Action is case-insensitive; ``*``/``?`` in
Resource and in StringLike; every condition of a statement must hold, any value of a
key may; Bool compares ``true``/``false``), so they are evaluated by the same code
with ``acs:`` ARNs and ``acs:RequestTag/<key>``, ``acs:ResourceTag/<key>`` keys.  RAM
documents no Null operator: its tag conditions are ``StringLike`` ``"*"`` on the tag
key, which a request without the key fails (as any non-negated operator here).

It answers for one request context at a time: action, resource ARN and context keys.
It is neither IAM nor RAM: the results are only as right as this reading of their
documentation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Context = Mapping[str, str | Sequence[str]]


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Context = field(default_factory=dict)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _wild(pattern: str, value: str, case: bool = True) -> bool:
    # IAM wildcards: * any run of characters (also across ':' and '/'), ? one character.
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _matches(patterns: Any, value: str, case: bool = True) -> bool:
    return any(_wild(p, value, case) for p in _as_list(patterns))


def _equals(want: str, have: str) -> bool:
    return have == want


def _like(want: str, have: str) -> bool:
    return _wild(want, have)


def _bool(want: str, have: str) -> bool:
    return str(have).lower() == str(want).lower()


_BASE_OPS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": _equals,
    "StringLike": _like,
    "ArnEquals": _equals,
    "ArnLike": _like,
    "Bool": _bool,
}
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _key_holds(operator: str, key: str, wanted: Any, context: Context) -> bool:
    present = key in context
    values = _as_list(context[key]) if present else []
    wanted_list = _as_list(wanted)
    if operator == "Null":
        # "true": the key must be absent; "false": present.
        return (not present) if str(wanted).lower() == "true" else present
    prefix, _, op = operator.rpartition(":")
    if_exists = op.endswith("IfExists")
    op = op.removesuffix("IfExists")
    negated = op in _NEGATED
    test = _BASE_OPS[_NEGATED.get(op, op)]

    def one(value: str) -> bool:
        hit = any(test(w, value) for w in wanted_list)
        return not hit if negated else hit

    if not present:
        if prefix == "ForAllValues" or if_exists:
            return True
        return negated and prefix != "ForAnyValue"
    if prefix == "ForAllValues":
        return all(one(v) for v in values)
    # ForAnyValue, or a single-valued key: any of the request's values.
    return any(one(v) for v in values)


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Context) -> bool:
    return all(
        _key_holds(operator, key, wanted, context)
        for operator, keys in conditions.items()
        for key, wanted in keys.items()
    )


def _applies(statement: Mapping[str, Any], req: Request) -> bool:
    if "Action" in statement:
        if not _matches(statement["Action"], req.action, case=False):
            return False
    elif _matches(statement["NotAction"], req.action, case=False):
        return False
    if "Resource" in statement:
        if not _matches(statement["Resource"], req.resource):
            return False
    elif "NotResource" in statement and _matches(statement["NotResource"], req.resource):
        return False
    return _conditions_hold(statement.get("Condition", {}), req.context)


def decide(policy: Mapping[str, Any], req: Request) -> str:
    """``"Deny"`` (explicit), ``"Allow"`` or ``"ImplicitDeny"`` for one request."""
    statements = policy["Statement"]
    if isinstance(statements, Mapping):
        statements = [statements]
    applying = [s for s in statements if _applies(s, req)]
    if any(s["Effect"] == "Deny" for s in applying):
        return "Deny"
    return "Allow" if applying else "ImplicitDeny"


def allowed(
    policy: Mapping[str, Any], req: Request, boundary: Mapping[str, Any] | None = None
) -> bool:
    """Whether ``req`` is allowed by ``policy`` (and, if given, within ``boundary``)."""
    if decide(policy, req) != "Allow":
        return False
    return boundary is None or decide(boundary, req) == "Allow"


def fill(policy: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """``policy`` with its placeholders (ACCOUNT_ID, REGION, ...) replaced."""
    text = json.dumps(policy)
    for name, value in values.items():
        text = text.replace(name, value)
    result: dict[str, Any] = json.loads(text)
    return result
