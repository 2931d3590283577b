# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of aiinfra.k3s.model_weights: the module as any other, or, with progress_interval, the module run
asynchronously on the node while the controller shows its progress file every progress_interval seconds.

The asynchronous run is ansible-core's own (async_wrapper on the node, async_status to poll it, its cleanup mode to
remove the job's file), as the task executor does for an async task; the task's result is the module's result.
The progress lines carry the host, the model's path, sizes, the rate and the file's name: never the URL nor the
headers."""

import base64
import json
import posixpath
import re
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.common.validation import check_type_int
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

display = Display()

ACTION_ONLY = ("progress_interval", "progress_timeout")
# Seconds before the first look at the job; then a tenth of the time the job has run (at least this, at most
# progress_interval), so the end of a fetch is noticed within about 10 % of its time.
FIRST_POLL = 0.5
POLL_SHARE = 0.1
DEFAULT_TIMEOUT = 7200
# What async_status adds to the job's result (the module's).
ASYNC_KEYS = ("ansible_job_id", "started", "finished", "results_file")
STAGING = ".staging"


def progress_name(model_path):
    """The progress file's name for a model path: one file name, the path's / as __ (other odd characters _)."""
    return ".progress-%s.json" % re.sub(r"[^A-Za-z0-9._-]", "_", str(model_path).replace("/", "__"))


def progress_line(host, data):
    """`<host>: <path> <GB done>/<GB total> GB, <MB/s> MB/s, ETA <s> s (<file>)` of a progress file's data."""
    done = data.get("bytes_done") or 0
    total = data.get("bytes_total")
    rate = data.get("rate") or 0
    known = isinstance(total, (int, float)) and not isinstance(total, bool)
    eta = "%d" % max(0, round((total - done) / rate)) if known and rate > 0 else "?"
    return "%s: %s %.2f/%s GB, %.1f MB/s, ETA %s s (%s)" % (
        host,
        data.get("path"),
        done / 1e9,
        "%.2f" % (total / 1e9) if known else "?",
        rate / 1e6,
        eta,
        data.get("file") or "-",
    )


def option_int(args, name, default):
    value = args.get(name)
    if value is None or value == "":
        return default
    try:
        return check_type_int(value)
    except TypeError:
        raise AnsibleActionFail("%s is %r, not a whole number of seconds" % (name, value)) from None


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        interval = option_int(args, "progress_interval", 0)
        timeout = option_int(args, "progress_timeout", DEFAULT_TIMEOUT)
        for name in ACTION_ONLY:
            args.pop(name, None)
        if interval <= 0 or self._task.check_mode or self._task.async_val:
            # As the normal action: the module in this task's way (the task's own async included).
            wrap_async = self._task.async_val
            result = merge_hash(
                result, self._execute_module(module_args=args, task_vars=task_vars, wrap_async=wrap_async)
            )
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        if timeout <= 0:
            raise AnsibleActionFail("progress_timeout is %r, not a positive number of seconds" % timeout)
        try:
            return merge_hash(result, self.with_progress(args, interval, timeout, task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def with_progress(self, args, interval, timeout, task_vars):
        """The module run asynchronously on the node, its progress shown every interval seconds until it ends;
        returns its result."""
        host = task_vars.get("inventory_hostname") or self._play_context.remote_addr
        model_path, store = args.get("path"), args.get("store")
        chosen = False
        if not args.get("progress_file") and isinstance(store, str) and posixpath.isabs(store):
            args["progress_file"] = posixpath.join(store, STAGING, progress_name(model_path))
            chosen = True
        progress_file = args.get("progress_file")

        # The module stops itself at progress_timeout (its run_timeout, unless a shorter one is given); async_wrapper's
        # kill comes a grace later, for a module that cannot (hashing a large model it already holds). The kill is
        # not enough alone: async_wrapper kills the process group it sets after forking, and a module started before
        # that is not in it.
        grace = max(30, 2 * interval)
        given = option_int(args, "run_timeout", None)
        own_limit = given is None or given > timeout
        if own_limit:
            args["run_timeout"] = timeout
        saved = self._task.async_val
        self._task.async_val = timeout + grace  # the async_wrapper's limit; the task stays a plain one for the executor
        try:
            started = self._execute_module(module_args=args, task_vars=task_vars, wrap_async=True)
        finally:
            self._task.async_val = saved
        jid = started.get("ansible_job_id")
        if started.get("failed") or not jid:
            return started
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))

        deadline = time.monotonic() + timeout + 2 * grace
        # The job is asked soon, then less and less often, up to once an interval: a fetch of a few files ends in a
        # second or two and must not wait a whole interval, and one of a minute is not left waiting half a minute
        # more (each look is one call to the node). A progress line goes out once an interval at most.
        begun = time.monotonic()
        delay = min(FIRST_POLL, interval)
        next_line = begun + interval
        status = {}
        while True:
            time.sleep(delay)
            delay = min(max(FIRST_POLL, POLL_SHARE * (time.monotonic() - begun)), interval)
            try:
                status = self.job_status(jid, async_dir, task_vars)
            except Exception as exc:  # pylint: disable=broad-except
                # The connection may fail for a moment (as the task executor's own polling, go on until the end).
                display.vvvv("model_weights: polling the job of %s failed, trying again (%s)" % (host, to_text(exc)))
                if time.monotonic() > deadline:
                    raise
                continue
            if status.get("finished") or time.monotonic() > deadline:
                break
            if time.monotonic() < next_line:
                continue
            next_line = time.monotonic() + interval
            data = self.read_progress(progress_file, task_vars)
            if data is not None and data.get("path") == model_path:
                display.display(progress_line(host, data), stderr=True)

        if not status.get("finished"):
            if chosen:
                self.remove_file(progress_file, task_vars)
            return {
                "failed": True,
                "msg": "model_weights was not seen to end within progress_timeout (%s s) and %s s more; its job %s "
                "may still run on the node, holding the store's lock: the next run waits for it, then resumes the "
                "fetch" % (timeout, 2 * grace, jid),
                "ansible_job_id": jid,
            }
        try:
            self._execute_module(
                module_name="ansible.legacy.async_status",
                module_args={"jid": jid, "mode": "cleanup", "_async_dir": async_dir},
                task_vars=task_vars,
            )
        except Exception as exc:  # pylint: disable=broad-except
            display.vvvv("model_weights: removing the job file of %s failed (%s)" % (host, to_text(exc)))
        out = {key: value for key, value in status.items() if key not in ASYNC_KEYS}
        stopped = [p for p in out.get("problems") or [] if isinstance(p, dict) and p.get("code") == "RUN_TIMEOUT"]
        if own_limit and stopped:  # the module stopped itself at the limit this action gave it
            for found in stopped:
                found["variable"] = "progress_timeout"
            out["msg"] = (
                "model_weights ran longer than progress_timeout (%s s) and stopped; nothing was published, the next "
                "run resumes the fetch" % timeout
            )
        elif status.get("failed") and status.get("msg") == "Timeout exceeded":  # async_wrapper's words: it killed
            out["msg"] = (  # the process group it set, which the module may not be in (then it stops at its limit)
                "model_weights ran longer than progress_timeout (%s s) and %s s more, and async_wrapper killed its "
                "job; the module stops at its own limit if the kill missed it, and publishes nothing after it. The "
                "next run resumes the fetch" % (timeout, grace)
            )
            if chosen:
                self.remove_file(progress_file, task_vars)  # the module could not remove it
        if started.get("ansible_facts"):  # interpreter discovery, as a plain run returns it
            out["ansible_facts"] = merge_hash(started["ansible_facts"], out.get("ansible_facts") or {})
        return out

    def job_status(self, jid, async_dir, task_vars):
        return self._execute_module(
            module_name="ansible.legacy.async_status",
            module_args={"jid": jid, "mode": "status", "_async_dir": async_dir},
            task_vars=task_vars,
        )

    def read_progress(self, path, task_vars):
        """The progress file's data, or None (not written yet, gone, unreadable)."""
        if not path:
            return None
        try:
            found = self._execute_module(
                module_name="ansible.legacy.slurp", module_args={"src": path}, task_vars=task_vars
            )
        except Exception as exc:  # pylint: disable=broad-except
            display.vvvv("model_weights: reading %s failed (%s)" % (path, to_text(exc)))
            return None
        if found.get("failed") or not found.get("content"):
            return None
        try:
            data = json.loads(base64.b64decode(found["content"]).decode("utf-8"))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def remove_file(self, path, task_vars):
        try:
            self._execute_module(
                module_name="ansible.legacy.file", module_args={"path": path, "state": "absent"}, task_vars=task_vars
            )
        except Exception as exc:  # pylint: disable=broad-except
            display.vvvv("model_weights: removing %s failed (%s)" % (path, to_text(exc)))
