"""Streamlit widgets shared by the pages (Streamlit turns every file in ``pages/`` into a page, so what
pages share lives here): session state and the store (``session``), who is signed in (``identity``),
the provider sidebar (``sidebar``), resume by ``?session=`` and recent conversations
(``conversations``), safe rendering of outside text and tables (``safe``), the typed display
name remembered for the browser (``display_name``), replies shown as the model writes them
(``streaming``), the knowledge interview's widgets
(``knowledge_chat``) and the tuning workbench's tabs (``workbench``).
"""
