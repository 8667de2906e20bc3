"""``python -m core.eval FILE... [--provider offline|openai] [--json]``: run scenario files."""
from core.eval.runner import main

raise SystemExit(main())
