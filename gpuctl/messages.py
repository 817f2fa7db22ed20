"""gpuctl's own words in the reader's language: --lang, else LC_ALL / LC_MESSAGES / LANG
(zh_CN.UTF-8 -> Chinese). Only the sentences gpuctl writes are translated; table headers, flags,
states and the API's fields stay as they are (see docs/glossary.md). The server's error messages
come in the same language: gpuctl sends it as Accept-Language."""

from __future__ import annotations

from collections.abc import Mapping

LANGUAGES = ("en", "zh")

ZH = {
    "submitted job {id} ({name}) to {workspace}, queue {queue}: {state}":
        "已提交作业 {id}（{name}）到工作空间 {workspace}，队列 {queue}：{state}",
    "pending reason: {reason}": "等待原因：{reason}",
    "quote: {quote}": "报价：{quote}",
    "job {id} ({name}): {state}": "作业 {id}（{name}）：{state}",
    "no jobs": "没有作业",
    "no jobs in {workspace}": "工作空间 {workspace} 中没有作业",
    "no {state} jobs": "没有 {state} 状态的作业",
    "no {state} jobs in {workspace}": "工作空间 {workspace} 中没有 {state} 状态的作业",
    "you are a member of no workspace": "您不是任何工作空间的成员",
    "no such workspace: {workspace}": "没有这个工作空间：{workspace}",
    "gpuctl: error: {message}": "gpuctl: 错误：{message}",
    # gpuctl serve
    "created service {name} ({id}) in {workspace}, queue {queue}: {state}":
        "已在工作空间 {workspace} 创建推理服务 {name}（{id}），队列 {queue}：{state}",
    "endpoint: {url}": "端点：{url}",
    "no services": "没有推理服务",
    "service {name} ({id}) in {workspace}: {action} -> {state}":
        "工作空间 {workspace} 中的推理服务 {name}（{id}）：{action} -> {state}",
    "service {name} ({id}) in {workspace}: replicas {low}-{high} (were {old}), {desired} wanted now":
        "工作空间 {workspace} 中的推理服务 {name}（{id}）：副本 {low}-{high}（原为 {old}），当前期望 {desired} 个",
    "deleted: its replicas ended, its endpoint is gone": "已删除：其副本已结束，端点已移除",
    "stopped: its replicas end, nothing is billed until it starts": "已停止：其副本结束，再次启动前不计费",
    "started: it waits in its queue for GPUs": "已启动：在队列中等待 GPU",
    "delete service {name} ({id}) in {workspace}? Its replicas end and its endpoint goes. [y/N] ":
        "删除工作空间 {workspace} 中的推理服务 {name}（{id}）？其副本将结束，端点将移除。[y/N] ",
    "service {name} not deleted": "推理服务 {name} 未删除",
}


def language(flag: str | None, env: Mapping[str, str]) -> str:
    """'zh' or 'en': the flag if given, else the first locale variable that is set."""
    chosen = flag or next((env[name] for name in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(name)), "")
    return "zh" if chosen.lower().replace("_", "-").startswith("zh") else "en"


def accept_language(lang: str) -> str:
    return "zh-hans" if lang == "zh" else "en"


def say(lang: str, text: str, **values) -> str:
    """text (an English template) in lang, filled with values."""
    return (ZH.get(text, text) if lang == "zh" else text).format(**values)
