"""apply's deadline per host, without libvirt: a wedged host's line says what was done and what was not."""

from __future__ import annotations

from virtxml_cpu.core.config import Config


def test_apply_names_what_a_wedged_host_did_and_did_not_handle(monkeypatch):
    import threading

    from virtxml_cpu.live import apply

    release = threading.Event()

    def fake_apply_into(uri, which, opts, res):
        res.todo = ["a", "b", "c"]
        res.done.append(res.todo.pop(0))
        res.tally["changed"] += 1
        release.wait(30)  # wedged before b

    monkeypatch.setattr(apply, "apply_into", fake_apply_into)
    res, problem = apply.apply_with_deadline("qemu+tcp://wedged/system", apply.Selection(all_domains=True),
                                            apply.ApplyOptions(Config()), host_timeout=0.5)
    release.set()
    assert res.tally == {"changed": 1}
    assert "timed out" in problem and "handled: a;" in problem and "not handled: b, c" in problem
