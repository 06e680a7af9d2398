"""Each refusal code's HTTP status: one table, read by the API's error handler and by
the board's own tables of refusals (:data:`board.store.claims.REFUSALS`). Apart from
:mod:`core.api.errors` so that a process that only reads the board (a worker, a
management command) does not import the REST framework to learn a number."""

from __future__ import annotations

HTTP_STATUS: dict[str, int] = {
    "validation_error": 400,
    "bound_recurring": 400,
    "unauthenticated": 401,
    "bad_signature": 401,
    "forbidden": 403,
    "observe_only": 403,
    "person_required": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "conflict": 409,
    "illegal_transition": 409,
    "verification_required": 409,
    "claim_required": 409,
    "approval_required": 409,
    "landing_failed": 409,
    "landing_underway": 409,
    "checks_running": 409,
    "checks_failed": 409,
    "cycle": 409,
    "depth_exceeded": 409,
    "too_many_children": 409,
    "ownership_conflict": 409,
    "budget_paused": 409,
    "agent_paused": 409,
    "not_routed": 409,
    "limit_reached": 409,
    "scope_busy": 409,
    "not_file_mutating": 422,
    "domain_violation": 422,
    "rate_limited": 429,
    "not_implemented": 501,
    "server_error": 500,
    "gateway_unavailable": 503,
    "busy": 503,
    "provision_failed": 500,
    "git_failed": 500,
    "forge_failed": 502,
}


def status_for(code: str) -> int:
    return HTTP_STATUS.get(code, 400)
