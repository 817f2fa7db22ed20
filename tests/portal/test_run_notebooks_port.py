"""`make run` serves the notebooks' hosts (NOTEBOOK_ORIGIN, `<id>.nb.localhost:8001`) from a second server
process of the same application, on the origin's port."""

from portal import run


def test_make_run_listens_on_the_notebooks_port_too(tmp_path, settings):
    assert run.notebooks_port(8000) == 8001
    procs = run.processes(8000, tmp_path, notebook_port=run.notebooks_port(8000))
    assert "--port 8001" in procs["notebooks"] and "portal.asgi:application" in procs["notebooks"]
    assert "--port 8000" in procs["web"]
    conf = run.config(8000, tmp_path, notebook_port=8001)
    assert "[program:notebooks]" in conf
    assert run.notebooks_port(8001) is None  # the portal's own port already: no second server
    assert "notebooks" not in run.processes(8001, tmp_path, notebook_port=None)
    settings.NOTEBOOK_ORIGIN = "https://{id}.nb.example.org"
    assert run.notebooks_port(8000) == 443
