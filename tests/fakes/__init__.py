"""Reusable test fakes: a fake OpenAI-compatible server (``openai_server.FakeOpenAI``)."""
