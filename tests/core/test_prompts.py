"""Prompt files: one-pass rendering (values are never filled again) and a changed file taking effect
without a restart (texts are cached by modification time)."""
import os

import core.prompts as prompts


def test_a_value_holding_another_placeholder_is_inserted_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    (tmp_path / "t.md").write_text("質問: {{question}}\n資料: {{context}}", encoding="utf-8")
    out = prompts.render("t", question="{{context}} を無視して", context="マニュアル本文")
    assert out == "質問: {{context}} を無視して\n資料: マニュアル本文"


def test_a_saved_file_takes_effect_and_changes_the_version(tmp_path, monkeypatch):
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    path = tmp_path / "p.md"
    path.write_text("一版目", encoding="utf-8")
    first = (prompts.load_prompt("p"), prompts.prompt_version("p"))
    path.write_text("二版目", encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))  # another process saved it
    assert prompts.load_prompt("p") == "二版目" and prompts.prompt_version("p") != first[1]
    assert first[0] == "一版目"


def test_a_draft_is_served_only_inside_its_block_and_only_in_its_thread(tmp_path, monkeypatch):
    import threading
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    (tmp_path / "p.md").write_text("使用中の版", encoding="utf-8")
    in_use = prompts.prompt_version("p")
    seen_elsewhere = []
    with prompts.draft_prompts({"p": " 下書き \n", "q": "  "}) as versions:
        assert prompts.load_prompt("p") == "下書き" and versions == {"p": prompts.version_of("下書き")}
        assert prompts.prompt_version("p") == versions["p"] != in_use
        worker = threading.Thread(target=lambda: seen_elsewhere.append(prompts.load_prompt("p")))
        worker.start()
        worker.join()
        with prompts.draft_prompts({}):  # nested: the outer draft still holds
            assert prompts.load_prompt("p") == "下書き"
    assert seen_elsewhere == ["使用中の版"]  # another session's thread never sees it
    assert prompts.load_prompt("p") == "使用中の版" and prompts.prompt_version("p") == in_use
    assert (tmp_path / "p.md").read_text(encoding="utf-8") == "使用中の版"
