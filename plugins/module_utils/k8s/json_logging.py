# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON logs for Python servers that read a logging dictConfig file (vLLM: VLLM_LOGGING_CONFIG_PATH).

The pinned vLLM image has no JSON formatter of its own, so a ConfigMap carries two files: a standard-library
formatter module and the dictConfig that uses it. The pod mounts them and puts the directory on PYTHONPATH.
"""

import json

MODULE = "aiinfra_jsonlog"

# Loaded inside the model server's image: standard library only.
FORMATTER_SOURCE = '''\
"""One JSON object per log record (written by aiinfra.k3s)."""
import json
import logging
import time


class JsonFormatter(logging.Formatter):
    def format(self, record):
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + ".%03dZ" % record.msecs,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)
'''


def logging_config(loggers, level="INFO"):
    """dictConfig sending the named loggers to stdout through the JSON formatter."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": MODULE + ".JsonFormatter"}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"}},
        "loggers": {name: {"handlers": ["json"], "level": level, "propagate": False} for name in loggers},
    }


def logging_files(loggers, level="INFO"):
    """The two files of the logging ConfigMap: {file name: content}."""
    return {
        MODULE + ".py": FORMATTER_SOURCE,
        "logging.json": json.dumps(logging_config(loggers, level), indent=2, sort_keys=True) + "\n",
    }
