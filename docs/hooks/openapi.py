"""MkDocs hook: write the server's OpenAPI document to ``docs/openapi.yaml`` before each
build, from the code (drf-spectacular, as ``/api/schema/`` serves it), so the API page's
rendering is never a stale copy. The file is generated, not committed (.gitignore)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def on_pre_build(config: Any, **kwargs: Any) -> None:
    # Django's settings make a state dir: a throwaway one, never the reader's ./.clawboo.
    os.environ.setdefault("CLAWBOO_STATE_DIR", tempfile.mkdtemp(prefix="clawboo-docs-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiYamlRenderer

    schema = SchemaGenerator().get_schema(request=None, public=True)
    (ROOT / "docs" / "openapi.yaml").write_bytes(OpenApiYamlRenderer().render(schema))
