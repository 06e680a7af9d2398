"""A run's credential on the REST API: its authentication class (named in the
settings' ``DEFAULT_AUTHENTICATION_CLASSES``) and its place in the OpenAPI document.
Apart from :mod:`boardmcp.credentials`, which every worker loads to mint and revoke
credentials, so that those processes never import the schema generator."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from boardmcp.credentials import live_run_credential
from core import roles
from core.api.auth import RUN_KEY_PREFIX


class RunAuthentication(BaseAuthentication):
    """``Authorization: Token clawboo-run-…`` on the REST API: a run's credential
    authenticates as its agent's owner, bound to that agent (``request.auth`` is the
    credential: core.roles reads it as the agent side, or the reviewer's for a
    critic), while the run's claim holds. An agent with no owner: refused."""

    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = get_authorization_header(request).split()
        if len(header) != 2 or header[0].decode("latin-1") != self.keyword:
            return None
        key = header[1].decode("latin-1")
        if not key.startswith(RUN_KEY_PREFIX):
            return None
        credential = live_run_credential(key)
        if credential is None:
            raise AuthenticationFailed("invalid token")
        owner = credential.agent.owner
        if owner is None or not owner.is_active:
            raise AuthenticationFailed("this run's agent has no owner to act for")
        # The run sees its agent's team only, not every team its owner does.
        roles.bind_to_agent_team(owner, credential.agent.team_id)
        return owner, credential

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class RunCredentialScheme(OpenApiAuthenticationExtension):
    """The run credential in the OpenAPI document, beside the API key: every
    operation a run may call lists it as a way in."""

    target_class = RunAuthentication
    name = "runCredential"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token clawboo-run-…`: the credential a run of an agent is "
            "given; it acts for the agent's owner, bound to that agent, while the "
            "run's claim holds.",
        }
