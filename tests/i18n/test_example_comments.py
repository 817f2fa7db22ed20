"""The Submit page's examples carry their comments in the reader's language; the YAML is the same."""

from types import SimpleNamespace

import yaml
from django.utils import translation

from scheduling.spec.examples import workspace_examples

POOL = SimpleNamespace(name="a100", vendor="nvidia", gpu_model="A100-80GB", gpu_memory_mib=81920,
                       sharing_modes=("exclusive", "fraction"))


def examples(language):
    with translation.override(language):
        return {key: text for key, _, text in workspace_examples(queue="vision-lab", spare_queue="community",
                                                                  pools=[POOL])}


def test_made_examples_comment_in_chinese_and_read_the_same():
    english, chinese = examples("en"), examples("zh-hans")
    assert set(english) == set(chinese) == {"single", "clean", "spare", "seed"}
    assert "# 对你的工作空间开放的队列" in chinese["single"] and "# a queue open to your workspace" in english["single"]
    assert "可抢占" in chinese["spare"] and "谷时" in chinese["clean"]
    for key in ("single", "clean", "spare"):
        assert yaml.safe_load(chinese[key]) == yaml.safe_load(english[key])
        comments = [line.split("#", 1)[1] for line in chinese[key].splitlines() if "#" in line]
        assert comments and all(any("\u4e00" <= ch <= "\u9fff" for ch in c) or "|" in c for c in comments), comments
    assert chinese["seed"] == english["seed"]   # the seed's task form, exactly as written
