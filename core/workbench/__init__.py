"""The prompt-tuning workbench (issue #9): filter recorded model calls (``records``), replay them with an
edited prompt and compare the outputs (``replay``, ``diff``), batch-replay a change, turn a conversation
into a ``core.eval`` scenario (``scenarios``), and save an edited prompt as a new version of its file
(``prompt_files``: admins only, recorded with who and when).

The judge is always our own validator: a replay validates the old and the new output against the
task's schema file (``schemas/<task>.schema.json``, with the knowledge turn's entry check), or, when
the record names no known task, the schema it carried (``response_format`` / ``tools``). No Streamlit.
"""
from core.workbench.diff import changed_fields, json_diff, output_diff, text_diff
from core.workbench.prompt_files import content_version, prompt_path, save_prompt_version
from core.workbench.records import (
                                    METHOD_BY_TASK,
                                    METHODS,
                                    error_type,
                                    filter_records,
                                    output_schema_version,
                                    record_method,
                                    record_task,
                                    records_frame,
)
from core.workbench.replay import (
                                    BATCH_COLUMNS,
                                    MAX_BATCH,
                                    Judge,
                                    ReplayResult,
                                    base_messages,
                                    batch_replay,
                                    batch_summary,
                                    edit_messages,
                                    judge_for,
                                    judge_output,
                                    replay,
                                    system_prompt_of,
                                    user_payload_of,
                                    with_model,
)
from core.workbench.scenarios import (
                                    conversation_turns,
                                    known_expectations,
                                    promote,
                                    run_scenario_check,
                                    save_scenario,
                                    scenario_dir,
                                    scenario_filename,
                                    scenario_yaml,
                                    suggest_expectations,
)

__all__ = [
    "BATCH_COLUMNS", "Judge", "MAX_BATCH", "METHODS", "METHOD_BY_TASK", "ReplayResult", "base_messages", "batch_replay",
    "batch_summary", "changed_fields", "content_version", "conversation_turns", "edit_messages", "error_type",
    "filter_records", "judge_for", "judge_output", "json_diff", "known_expectations", "output_diff",
    "output_schema_version", "prompt_path", "promote", "record_method", "record_task", "records_frame", "replay",
    "run_scenario_check", "save_prompt_version", "save_scenario", "scenario_dir", "scenario_filename", "scenario_yaml",
    "suggest_expectations", "system_prompt_of", "text_diff", "user_payload_of", "with_model",
]
