"""Offline interviewer: a deterministic, rule-driven stand-in for the model in the knowledge flow.

It reads the conversation it is given through :mod:`core.knowledge.case_facts` (the facts a knowledge
entry needs: contract type, clause, risks, action plan, clause sample), writes the entry from them
and walks the phases collect_case → organize_risks → draft_knowledge → review_knowledge, listing in
``missing_info`` exactly what is still unknown. Its reply is a schema-valid turn, like a model's.

What it writes is review language (:mod:`core.knowledge.review_language`): review points are pattern
summaries plus the risks the user stated (「想定リスク: …」), the action plan is the user's actions in
the plain form, a question (「…べきでしょうか？」) is answered as a question and never becomes policy,
and titles repeat no segment. It never asks one thing twice after the user has replied without it
(``MAX_ASKS``); asked to wrap up (「この内容でまとめてください」「以上です」), it drafts the entry with
what is known and names what is missing. When the request carries house-style examples (the most
similar confirmed entries, :mod:`core.knowledge.house_style`), it proposes their review points and
action plan, in the house's own wording, for the user to adopt.
"""
from __future__ import annotations

import re
from typing import Any

from core.knowledge.case_facts import (
    PROPOSAL_MARK,
    TOPICS,
    WAIVE_WORDS,
    Facts,
    as_typed,
    assistant_message_of,
    collect_facts,
    current_clause_text,
    labelled_fields,
    nfkc,
)
from core.knowledge.confirmation import accepts_incomplete, is_typed_confirmation, missing_for_confirmation
from core.knowledge.house_style import parse_examples
from core.knowledge.review_language import concise_title, is_wrap_up
from core.llm.base import LLMRequest

SAMPLE_CLAUSES = {
    "損害賠償": "甲及び乙は、本契約に関して相手方に損害を与えた場合、直接かつ通常の損害に限り賠償する。ただし、賠償額の総額は、損害発生の直前12か月間に本契約に基づき支払われた委託料の総額を上限とする。故意又は重過失による場合はこの限りでない。",
    "秘密保持": "甲及び乙は、相手方から開示された秘密情報を、本契約の目的以外に使用せず、第三者に開示してはならない。本条の義務は、本契約終了後も5年間存続する。",
    "契約解除": "甲又は乙は、相手方が本契約に違反し、相当の期間を定めて催告したにもかかわらず、当該期間内に是正されない場合、本契約を解除することができる。",
    "知的財産権": "本業務の成果物に関する著作権（著作権法第27条及び第28条の権利を含む）は、委託料の完済時に乙から甲に移転する。ただし、乙が従前から保有する著作物の著作権は乙に留保する。",
    "再委託": "乙は、甲の事前の書面による承諾を得た場合に限り、本業務の一部を第三者に再委託できる。この場合、乙は再委託先の行為について甲に対し責任を負う。",
    "支払条件": "甲は、検収完了月の翌月末日までに、乙の指定する銀行口座に振り込む方法により委託料を支払う。",
    "検収": "甲は、成果物の納入後10営業日以内に検査を行い、合否を乙に書面で通知する。期間内に通知がない場合は、検査に合格したものとみなす。",
    "契約不適合責任": "乙は、成果物が本契約の内容に適合しない場合、甲が検収後1年以内に通知したときに限り、履行の追完又は代金の減額に応じる。",
}
MAX_ASKS = 2  # a key asked this many times, the user replying without it, is not asked again
MISSING_LABELS = {
    "contract_type": "契約書の種類（例: 業務委託契約、秘密保持契約）",
    "target_clause": "問題となった条項（条番号・見出し）",
    "case": "事例の概要（何が問題になったか）",
    "review_points": "想定されるリスク・審査で確認すべきポイント",
    "action_plan": "修正・交渉の方針（どう対応すべきか）",
    "clause_sample": "推奨する条文例（なければ「おまかせ」）",
}
# Review language: (topic or None for any, cue words in the user's account, the review point, a
# title phrase). Review points are these summaries, never the user's own sentences.
REVIEW_PATTERNS: tuple[tuple[str | None, tuple[str, ...], str, str], ...] = (
    ("損害賠償", ("上限", "無制限", "青天井", "限度"), "損害賠償の上限額が定められ、責任が無制限になっていないか確認する",
     "上限額の設定"),
    ("損害賠償", ("間接損害", "逸失利益", "特別損害", "一切の損害", "範囲"), "賠償の範囲が直接かつ通常の損害に限定されているか確認する",
     "範囲の限定"),
    ("損害賠償", ("故意", "重過失"), "故意・重過失の場合に責任制限を適用しない旨が定められているか確認する", "故意・重過失の扱い"),
    ("損害賠償", ("一方的", "片務", "当社のみ", "乙のみ", "甲のみ", "一方だけ"), "賠償責任が一方の当事者だけに偏っていないか確認する",
     "責任の双務化"),
    ("秘密保持", ("期間", "年", "存続"), "秘密保持義務の存続期間が情報の重要性と取引期間に見合っているか確認する", "存続期間の確保"),
    ("秘密保持", ("定義", "範囲"), "秘密情報の定義と範囲が明確に定められているか確認する", "秘密情報の範囲の明確化"),
    ("秘密保持", ("返還", "廃棄"), "契約終了時の秘密情報の返還・廃棄の定めがあるか確認する", "秘密情報の返還・廃棄"),
    ("秘密保持", ("漏えい", "漏洩"), "漏えい時の通知義務と責任の所在が定められているか確認する", "漏えい時の対応"),
    ("契約解除", ("いつでも", "一方的", "催告", "予告"), "解除事由と催告手続が明確で、一方の当事者だけが自由に解除できる定めになっていないか確認する",
     "一方的な解除権の制限"),
    ("知的財産権", ("帰属", "移転", "譲渡", "著作権", "権利"), "成果物の知的財産権の帰属と移転の時期が明確に定められているか確認する",
     "成果物の権利帰属の明確化"),
    ("知的財産権", ("既存", "従前", "留保", "汎用"), "受託者が従前から保有する権利やノウハウが留保されているか確認する", "既存の権利の留保"),
    ("再委託", ("承諾", "無断", "再委託", "下請"), "再委託の可否・事前承諾の要否と再委託先の責任の所在が定められているか確認する",
     "再委託の事前承諾"),
    ("支払条件", ("期日", "遅延", "支払", "遅れ", "手形"), "支払期日・支払方法・遅延時の扱いが明確に定められているか確認する", "支払条件の明確化"),
    ("検収", ("みなし", "期間", "検収", "基準"), "検収の期間・合格基準とみなし合格の扱いが明確に定められているか確認する", "検収手続の明確化"),
    ("契約不適合責任", ("期間", "通知", "年", "契約不適合", "瑕疵"), "契約不適合責任の期間・通知期限・責任の範囲が適切に限定されているか確認する",
     "契約不適合責任の期間の限定"),
    ("競業避止", ("競業",), "競業避止義務の期間・地域・対象範囲が過大でないか確認する", "競業避止義務の範囲の限定"),
    ("契約期間・更新", ("更新", "期間"), "契約期間と自動更新・更新拒絶の通知期限が明確に定められているか確認する", "自動更新の拒絶条件"),
    ("準拠法・管轄", ("管轄", "準拠法", "裁判所"), "準拠法と合意管轄裁判所が自社に不利でないか確認する", "合意管轄の見直し"),
    ("個人情報の取扱い", ("個人情報",), "個人情報の取扱い・安全管理措置と委託先の管理が定められているか確認する", "個人情報の取扱い"),
    ("反社会的勢力の排除", ("反社",), "反社会的勢力の排除と無催告解除の定めがあるか確認する", "反社会的勢力の排除"),
    (None, ("無制限", "上限がな", "上限なし", "青天井"), "{subject}の責任に上限が設けられているか確認する", "責任上限の設定"),
    (None, ("一方的", "片務", "不平等"), "{subject}が一方の当事者だけに有利な内容になっていないか確認する", "一方的な定めの是正"),
    (None, ("曖昧", "不明確", "揉め", "もめ", "紛争", "トラブル", "解釈", "争い"),
     "{subject}の要件と範囲が明確に定められ、解釈の争いが生じないか確認する", "要件と範囲の明確化"),
    (None, ("過大", "負担", "不利", "損"), "{subject}で自社が過大な負担を負う内容になっていないか確認する", "過大な負担の是正"),
)
MAX_REVIEW_POINTS = 3  # pattern summaries; the user's own risks come on top
MAX_USER_RISKS = 4
# Sahen nouns that turn an action sentence into a noun phrase: 「…を明記する」 → 「…の明記」.
_ACTION_NOUN = re.compile(
    r"^(.{2,24}?)を(明記|設定|削除|追加|限定|修正|変更|要求|確認|規定|交渉|提案|延長|短縮|除外|新設|制限|確保|明確化)"
    r"(?:する|します|すべき|したい|し|して|を求め|を提案|を希望|を交渉)")


def _value(facts: Facts, key: str) -> str:
    if key in facts.explicit:
        return facts.explicit[key]
    if key == "contract_type":
        return facts.contract_type
    if key == "target_clause":
        return facts.target_clause or (f"{facts.topic}条項" if facts.topic else "")
    if key == "review_points":
        points = ([line for line in facts.adopted["review_points"].split("\n") if line.strip()]
                  if "review_points" in facts.adopted else [f"・{p}" for p in review_summary(facts)])
        points += [f"・{r}" for r in list(dict.fromkeys(facts.risks))[:MAX_USER_RISKS]
                   if not any(r in p for p in points)]
        return "\n".join(points)
    if key == "action_plan":
        if facts.action_plan:
            return "\n".join(f"・{p}" for p in dict.fromkeys(facts.action_plan))
        return facts.adopted.get("action_plan", "")
    if key == "clause_sample":
        if facts.clause_sample:
            return facts.clause_sample
        if facts.sample_waived:
            return SAMPLE_CLAUSES.get(facts.topic, "（条文例は事案に応じて作成してください）")
        return ""
    if key == "knowledge_title":
        return auto_title(facts)
    return ""


def _user_account(facts: Facts) -> tuple[str, str]:
    """(what the user said should be done, what the user said went wrong) as plain text."""
    return "\n".join(facts.action_plan), "\n".join(facts.review_points + facts.case)


def _matching_patterns(facts: Facts, text: str) -> list[tuple[str | None, tuple[str, ...], str, str]]:
    topical = [p for p in REVIEW_PATTERNS if p[0] is not None and p[0] == facts.topic and any(c in text for c in p[1])]
    generic = [p for p in REVIEW_PATTERNS if p[0] is None and any(c in text for c in p[1])]
    return topical + ([] if topical else generic)


def _subject(facts: Facts) -> str:
    if facts.topic:
        return f"{facts.topic}条項"
    return facts.target_clause or "当該条項"


def review_summary(facts: Facts) -> list[str]:
    """Review points in review language (「…が定められているか確認する」), summarised from what the user
    told us; never the user's own sentences (「揉めました」)."""
    if not (facts.review_points or facts.case or facts.action_plan):
        return []
    actions, problems = _user_account(facts)
    points = [p[2].format(subject=_subject(facts)) for p in _matching_patterns(facts, problems + "\n" + actions)]
    if not points:
        points = [f"{_subject(facts)}の内容が自社にとって不利な定めになっていないか確認する"]
    return list(dict.fromkeys(points))[:MAX_REVIEW_POINTS]


def _action_phrase(sentence: str) -> str:
    """「…を明記し、…」 → 「…の明記」: a noun phrase, or "" when the sentence has no such shape."""
    first = re.split(r"[、,。]", sentence, maxsplit=1)[0]
    m = _ACTION_NOUN.match(first)
    return f"{m.group(1)}の{m.group(2)}" if m else ""


def _topic_named(topic: str, *texts: str) -> bool:
    """True when one of ``texts`` already names ``topic`` (its name or one of its words)."""
    words = (topic, *TOPICS.get(topic, ()))
    return any(w and w in text for w in words for text in texts)


def auto_title(facts: Facts) -> str:
    """「<契約類型>の<条項>：<noun phrase>」 without a repeated segment: the clause is left out when the
    contract type or the phrase already names it (「秘密保持契約：存続期間の確保」). The phrase is a review
    pattern's title phrase (what the user asked for first, else what went wrong), else the first
    action as a noun phrase (「…の明記」), else 「見直し」; it never ends mid-clause (「…を明記し」)."""
    actions, problems = _user_account(facts)
    found = _matching_patterns(facts, actions) or _matching_patterns(facts, problems)
    phrase = found[0][3] if found else ""
    if not phrase:
        phrase = next((p for p in map(_action_phrase, facts.action_plan) if p), "")
    clause = facts.topic
    if not clause and facts.target_clause:
        heading = re.search(r"[(（]([^)）]{1,20})[)）]", facts.target_clause)
        clause = facts.target_clause[:heading.start()] if heading and phrase and heading.group(1) in phrase \
            else facts.target_clause
    if facts.contract_type:
        named = bool(facts.topic) and _topic_named(facts.topic, phrase, facts.contract_type)
        head = facts.contract_type if (named or not clause) else f"{facts.contract_type}の{clause}"
    else:
        head = clause or "条項"
    if phrase:
        return concise_title(f"{head}：{phrase}")
    return concise_title(f"{head}の見直し" if facts.action_plan else head)


def missing_items(facts: Facts) -> list[str]:
    missing = []
    if not _value(facts, "contract_type"):
        missing.append("contract_type")
    if not (facts.target_clause or facts.topic or "target_clause" in facts.explicit):
        missing.append("target_clause")
    if not (facts.case or facts.review_points or facts.action_plan):
        missing.append("case")
    if not (facts.review_points or "review_points" in facts.explicit or "review_points" in facts.adopted):
        missing.append("review_points")
    if not _value(facts, "action_plan"):
        missing.append("action_plan")
    if not _value(facts, "clause_sample"):
        missing.append("clause_sample")
    return missing


def draft_entry(facts: Facts) -> dict[str, str]:
    """The entry, each field in the user's own typography (（）／３ read folded, written back as typed)."""
    keys = ("contract_type", "knowledge_title", "target_clause", "review_points", "action_plan", "clause_sample")
    return {k: as_typed(_value(facts, k), facts.typed) for k in keys}


def _known_summary(facts: Facts) -> str:
    entry = draft_entry(facts)
    known = []
    if entry["contract_type"]:
        known.append(f"契約類型: {entry['contract_type']}")
    if entry["target_clause"]:
        known.append(f"対象条項: {entry['target_clause']}")
    plan = entry["action_plan"].replace("\n", " ").lstrip("・").strip()
    if plan:
        known.append(f"対応方針: 「{clip(plan, 60)}」")
    return "、".join(known)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with 「…」 when something was cut (never mid-word silently)."""
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _question(key: str, facts: Facts) -> str:
    if key == "contract_type":
        return "この事例はどの種類の契約書に関するものですか？（例: 業務委託契約、秘密保持契約、売買契約）"
    if key == "target_clause":
        if facts.clauses_in_attachments:
            listed = "、".join(list(facts.clauses_in_attachments)[:8])
            return f"添付から次の条項を読み取りました: {listed}。問題になったのはどの条項ですか？"
        return "問題になった条項の条番号や見出しを教えてください（例: 第8条（損害賠償））。"
    if key == "case":
        return "どのような点が問題になったのか、事例の概要を教えてください（相手方の提示内容、こちらの懸念など）。"
    if key == "review_points":
        return "この条項で想定されるリスクや、審査時に確認すべきポイントは何ですか？"
    if key == "action_plan":
        return "このケースでは、どのように修正・交渉すべきですか？（例: 賠償上限を設ける、期間を5年にする）"
    if key == "clause_sample":
        return "推奨する条文例があれば「」で囲んで教えてください。なければ「おまかせ」と送っていただければ、標準的な条文例を入れます。"
    return ""


def _as_list(value: str) -> str:
    """A field value as a markdown bullet list (one item per line, 「・」 dropped)."""
    items = [line.strip().lstrip("・-*").strip() for line in value.split("\n")]
    return "\n".join(f"- {item}" for item in items if item) or "- （未設定）"


def _draft_message(entry: dict[str, str], heading: str, footer: str) -> str:
    """The draft as chat markdown: real line breaks, blank lines between blocks, lists as lists."""
    blocks = [heading,
              "\n".join([f"■ タイトル: {entry['knowledge_title'] or '（未設定）'}",
                         f"■ 契約類型: {entry['contract_type'] or '（未設定）'}",
                         f"■ 対象条項: {entry['target_clause'] or '（未設定）'}"]),
              f"■ 審査ポイント:\n{_as_list(entry['review_points'])}",
              f"■ 対応方針:\n{_as_list(entry['action_plan'])}",
              f"■ 条文例:\n{entry['clause_sample'] or '（未設定）'}", footer]
    return "\n\n".join(b for b in blocks if b)


def _missing_note(missing: list[str]) -> str:
    if not missing:
        return ""
    return ("まだ次の情報がありません: " + "、".join(MISSING_LABELS[k] for k in missing)
            + "。分かれば「対応方針: …」のように項目名を付けて送ってください。")


def _question_note(facts: Facts, examples: list[dict[str, Any]]) -> str:
    """A question the user asked is answered as one and never taken as the policy."""
    if not facts.questions:
        return ""
    asked = facts.questions[-1].rstrip("?？")
    note = f"ご質問（「{clip(asked, 60)}」）は、方針としては登録していません。"
    example = examples[0] if examples else None
    if example and str(example.get("action_plan") or "").strip():
        plan = str(example["action_plan"]).replace("\n", " ").lstrip("・").strip()
        note += (f"{PROPOSAL_MARK} No.{example.get('entry_id')}「{example.get('knowledge_title')}」では、"
                 f"対応方針を「{clip(plan, 120)}」としています。")
    return note + "方針として登録する場合は「対応方針: …」のように送ってください。"


def _proposal(ask: list[str], examples: list[dict[str, Any]]) -> str:
    """The house proposal for the review points / action plan being asked (the most similar
    confirmed entry's own wording), or ""."""
    if not examples:
        return ""
    example = examples[0]
    lines = [f"{label}: {str(example.get(key) or '').strip()}" for key, label in
             (("review_points", "・審査ポイント"), ("action_plan", "・対応方針"))
             if key in ask and str(example.get(key) or "").strip()]
    if not lines:
        return ""
    return (f"参考: {PROPOSAL_MARK} No.{example.get('entry_id')}「{example.get('knowledge_title')}」では次のように"
            "整理しています。\n" + "\n".join(lines) + "\nこの事例にも当てはまる場合は「この方針で」と送ってください。")


def respond(request: LLMRequest) -> dict[str, Any]:
    """The next turn for the conversation in ``request.messages``."""
    facts, instructions, last_turn = collect_facts(request.messages)
    examples = parse_examples(str(request.messages[0].get("content") or "")) if request.messages else []
    last_phase = ((last_turn or {}).get("state") or {}).get("phase", "collect_case")
    latest = instructions[-1] if instructions else ""
    missing = missing_items(facts)
    missing_labels = [MISSING_LABELS[k] for k in missing]

    def turn(mode: str, phase: str, message: str, knowledge: dict[str, str] | None, todo: list[str]) -> dict[str, Any]:
        return {"control": {"schema_version": "1.0", "mode": mode},
                "state": {"phase": phase, "missing_info": todo},
                "assistant_message": message, "knowledge_json": knowledge}

    if not latest.strip():
        return turn("clarify", last_phase, "メッセージが空でした。事例の内容やご質問を入力してください。", None, missing_labels)

    question_note = _question_note(facts, examples)
    drafted = last_phase in ("draft_knowledge", "review_knowledge")
    if drafted:  # once there is a draft, every turn returns it (updated), never a question loop
        entry = draft_entry(facts)
        # what the console confirms in the library (core.knowledge.confirmation), no field edit, no open question
        confirmed = is_typed_confirmation(latest) and not labelled_fields(latest) and not facts.questions
        lacking = missing_for_confirmation(entry)
        if confirmed and lacking and not accepts_incomplete(latest):  # the console confirms nothing: say why
            return turn("finalize", "review_knowledge", _draft_message(
                entry, f"確定の前に確認させてください。この草案は{'・'.join(lacking)}が未設定です。", ""),
                entry, missing_labels)
        if confirmed:
            return turn("finalize", "review_knowledge", _draft_message(
                entry, "確定のご指示を受け付けました。この内容がナレッジの最終版です。",
                " ".join(x for x in (_missing_note(missing),
                                     "別の事例を続けて登録する場合は、新しい会話を始めてください。") if x)), entry, missing_labels)
        heading = question_note or "ご指摘を反映しました。"
        return turn("finalize", "review_knowledge", _draft_message(
            entry, heading, " ".join(x for x in (_missing_note(missing), "この内容で確定してよろしいですか？修正がある場合は"
                                                "「対応方針: …」のように項目名を付けて送ってください。") if x)),
            entry, missing_labels)

    previous = assistant_message_of(last_turn)
    for _ in range(2):  # the very same message again would be a loop: what it asked is then left open
        open_keys = [k for k in missing if k not in facts.declined and facts.asked.get(k, 0) < MAX_ASKS]
        known_enough = bool(facts.contract_type or facts.topic or facts.target_clause or facts.case or facts.review_points)
        wrap_up = is_wrap_up(latest)
        if not missing or (known_enough and (wrap_up or not open_keys)):
            entry = draft_entry(facts)
            if not missing:
                heading = "ヒアリングした内容をもとに、ナレッジのドラフトを作成しました。"
            else:
                heading = "ここまでに伺った内容で、ナレッジの草案をまとめました。"
            footer = " ".join(x for x in (
                _missing_note(missing),
                "内容をご確認ください。問題なければ「確定」、修正がある場合は「タイトル: …」「対応方針: …」のように送ってください。") if x)
            return turn("finalize", "draft_knowledge", _draft_message(entry, question_note + heading if question_note
                                                                       else heading, footer), entry, missing_labels)

        keys = open_keys or missing
        case_missing = [k for k in keys if k in ("contract_type", "target_clause", "case")]
        phase = "collect_case" if [k for k in missing if k in ("contract_type", "target_clause", "case")] else "organize_risks"
        ask = (case_missing or keys)[:2]
        known = _known_summary(facts)
        intro = "ありがとうございます。" + (f"ここまでで {known} と理解しました。" if known else "")
        if wrap_up and not known_enough:
            intro = "まだ草案にまとめられる内容がありません。"
        if facts.attachment_names and len(instructions) <= 1:
            intro += f"添付ファイル（{'、'.join(dict.fromkeys(facts.attachment_names))}）を読み込みました。"
        current = current_clause_text(facts)
        if current and "target_clause" not in missing and len(instructions) <= 3:
            intro += f"\n\n添付の現行条文（{facts.target_clause}）: {clip(current, 160)}"
        short_reply = len(latest) < 6 and not any(w in latest for w in WAIVE_WORDS) and not wrap_up
        mode = "clarify" if short_reply or question_note else "interview"
        if short_reply:
            intro = "すみません、もう少し詳しく教えてください。" + (f"（現在: {known}）" if known else "")
        if question_note:
            intro = question_note + ("\n\n" + intro if intro else "")
        message = intro + "\n\n" + "\n".join(f"- {_question(k, facts)}" for k in ask)
        proposal = _proposal(ask, examples)
        if proposal:
            message += "\n\n" + proposal
        if "".join(nfkc(message).split()) != "".join(nfkc(previous).split()):
            break
        facts.declined.update(ask)
    return turn(mode, phase, message, None, missing_labels)
