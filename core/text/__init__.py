"""Text utilities for every layer above: normalisation for matching (``normalize``), masking of personal
data and secrets (``pii``), markdown without links or images (``markup``), CSV cells that stay data (``spreadsheet``), document text fenced as data
(``untrusted``), sentence quoting (``quoting``), the input gates (``input_gate``), Sudachi tokens
(``ja_tokens``) and Japan time (``jst``)."""
