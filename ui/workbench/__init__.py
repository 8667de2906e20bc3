"""The デバッグログ page's parts: the filters and the record list (``records``), the replay editor and
prompt saving (``replay``), batch replay (``batch``) and promoting a conversation to a scenario
(``promote``). The logic is in ``core.workbench``; these only draw it."""
