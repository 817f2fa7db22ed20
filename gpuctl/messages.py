"""gpuctl's own words in the reader's language: --lang, else LC_ALL / LC_MESSAGES / LANG
(zh_CN.UTF-8 -> Chinese). The sentences gpuctl writes, its table headers and labels and its fixed
words are translated; flags, states, values and the keys of JSON and YAML output stay as they are
(see docs/glossary.md). The server's error messages come in the same language: gpuctl sends it as
Accept-Language."""

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
    # gpuctl serve keys
    "key {name} ({hint}…) of service {service}: copy it now, it is not shown again":
        "服务 {service} 的密钥 {name}（{hint}…）：请立即复制，之后不再显示",
    "service {service} has no keys": "服务 {service} 没有密钥",
    "key {id} of service {service} revoked": "已吊销服务 {service} 的密钥 {id}",
    "REQ/MIN": "每分钟请求",
    "TOKENS/MIN": "每分钟令牌",
    # gpuctl secret, gpuctl registry
    "value of {name}: ": "{name} 的值：",
    "password for {server}: ": "{server} 的密码：",
    "secret {name} set in {workspace} ({size} bytes)": "已在工作空间 {workspace} 设置密钥 {name}（{size} 字节）",
    "no secrets in {workspace}": "工作空间 {workspace} 中没有密钥",
    "secret {name} deleted from {workspace}": "已从工作空间 {workspace} 删除密钥 {name}",
    "credential for {server} set in {workspace} (user {username})":
        "已在工作空间 {workspace} 设置 {server} 的凭据（用户 {username}）",
    "no registry credentials in {workspace}": "工作空间 {workspace} 中没有镜像仓库凭据",
    "credential for {server} deleted from {workspace}": "已从工作空间 {workspace} 删除 {server} 的凭据",
    "gpuctl: error: {message}": "gpuctl: 错误：{message}",
    # gpuctl service-account
    "service account {username} made in {workspace} ({role})": "已在工作空间 {workspace} 创建服务账号 {username}（{role}）",
    "no service accounts in {workspace}": "工作空间 {workspace} 中没有服务账号",
    "service account {name} deleted from {workspace}; its tokens are revoked":
        "已从工作空间 {workspace} 删除服务账号 {name}；其令牌已吊销",
    "token {name} of {account} in {workspace} (scope {scope}, expires {expires}); it is not shown again:":
        "工作空间 {workspace} 中 {account} 的令牌 {name}（范围 {scope}，{expires} 过期）；之后不再显示：",
    "{account} has no tokens": "{account} 没有令牌",
    "token {id} of {account} revoked": "{account} 的令牌 {id} 已吊销",
    # gpuctl login
    "Open {uri} and type the code {code}": "请打开 {uri} 并输入代码 {code}",
    "(or open {uri})": "（或打开 {uri}）",
    "waiting for the approval ...": "等待批准……",
    "signed in to {url} as {username} (scope {scope}); token saved in profile {profile} of {path}":
        "已以 {username} 身份登录 {url}（范围 {scope}）；令牌已保存到 {path} 的配置 {profile}",
    "note: {name} is set and wins over the saved token": "注意：已设置 {name}，它优先于保存的令牌",
    "the sign-in was denied in the browser": "登录已在浏览器中被拒绝",
    "the code expired before it was approved: run gpuctl login again": "代码在批准前已过期：请重新运行 gpuctl login",
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
    "service {name}": "推理服务 {name}",
    # gpuctl notebook
    "no notebooks": "没有笔记本",
    "{minutes} min": "{minutes} 分钟",
    "notebook {name} ({id}) in {workspace}: {action} -> {state}": "工作空间 {workspace} 中的笔记本 {name}（{id}）：{action} -> {state}",
    "stopped, its GPU is free and its home kept": "已停止，其 GPU 已释放，主目录保留",
    "started, it waits in its queue for a GPU": "已启动，在队列中等待 GPU",
    "notebook {name} is {state}: the URL answers once it runs": "笔记本 {name} 处于 {state}：运行后该 URL 才会响应",
    # quotes
    "quote for {spec} in {workspace}, {currency}": "{spec} 在工作空间 {workspace} 中的报价，币种 {currency}",
    ", expected duration {hours} h": "，预计时长 {hours} 小时",
    "cheapest: #{number} {id}  (gpuctl submit -f {spec} --option {number})":
        "最便宜：#{number} {id}  （gpuctl submit -f {spec} --option {number}）",
    "cheapest: {id}  (gpuctl submit {spec} --option {id})": "最便宜：{id}  （gpuctl submit {spec} --option {id}）",
    "cheapest: #{number} {id}  (deploy it with --option {number})": "最便宜：#{number} {id}  （用 --option {number} 部署）",
    "trade-offs:": "权衡：",
    "no option can run this spec": "没有可以运行此作业规格的选项",
    "no option can run this service": "没有可以运行此推理服务的选项",
    "not offered: {reason}": "不提供：{reason}",
    "option {id}": "选项 {id}",
    "price/h": "每小时价格",
    "off-peak price/h": "谷时每小时价格",
    "estimate": "估算",
    ", ": "，",
    # costs and quotas
    "costs of {workspace} in {month} ({start} to {end}), by {group_by}":
        "{workspace} 在 {month} 的费用（{start} 至 {end}），按 {group_by} 分组",
    "all my workspaces": "我的所有工作空间",
    ", as of {time} UTC": "，截至 {time} UTC",
    ", no usage yet": "，尚无用量",
    "no queues": "没有队列",
    "no queues for {workspace}": "工作空间 {workspace} 没有队列",
    # fixed words and the labels of `gpuctl show` and `gpuctl serve show`
    "yes": "是",
    "no": "否",
    "unknown": "未知",
    "(none)": "（无）",
    "(none yet)": "（暂无）",
    "(none placed yet)": "（尚未放置）",
    "{cost} (final)": "{cost}（最终）",
    "{cost} so far": "目前 {cost}",
    "none yet (estimate {estimate})": "暂无（估算 {estimate}）",
    "between {earliest} and {latest} UTC": "{earliest} 至 {latest} UTC 之间",
    "not before {earliest} UTC": "不早于 {earliest} UTC",
    "by {latest} UTC": "不晚于 {latest} UTC",
    "{running} running, {desired} wanted": "运行 {running} 个，期望 {desired} 个",
    "evaluations (newest last)": "评估记录（最新的在最后）",
    "job": "作业",
    "service": "推理服务",
    "name": "名称",
    "workspace": "工作空间",
    "queue": "队列",
    "state": "状态",
    "pending reason": "等待原因",
    "queue position": "队列位置",
    "expected start": "预计开始",
    "reason": "原因",
    "type": "类型",
    "priority": "优先级",
    "preemptible": "可抢占",
    "reduce cost": "降低成本",
    "expected": "预计时长",
    "created": "创建时间",
    "started": "开始时间",
    "finished": "结束时间",
    "cost": "费用",
    "replicas": "副本",
    "quote": "报价",
    "events": "事件",
    "endpoint": "端点",
    "range": "副本范围",
    "scale reason": "扩缩容原因",
    "requests": "请求数",
    "requests/s": "每秒请求数",
    "cold starts": "冷启动次数",
    "GPU-seconds": "GPU 秒",
    "GPU-s/request": "每请求 GPU 秒",
    "cost so far": "目前费用",
    "cost/1K req": "每千次请求费用",
    # table headers (ID, URL, RPS, P50 and P95 stay as they are)
    "NAME": "名称",
    "SIZE": "大小",
    "CHANGED": "修改时间",
    "BY": "修改人",
    "REGISTRY": "镜像仓库",
    "USERNAME": "用户名",
    "STARTS WITH": "开头",
    "SCOPE": "范围",
    "EXPIRES (UTC)": "过期时间 (UTC)",
    "LAST USED (UTC)": "最近使用 (UTC)",
    "REVOKED (UTC)": "吊销时间 (UTC)",
    "WORKSPACE": "工作空间",
    "QUEUE": "队列",
    "STATE": "状态",
    "PRIORITY": "优先级",
    "REPLICAS": "副本",
    "CREATED (UTC)": "创建时间 (UTC)",
    "TYPE": "类型",
    "PREEMPTIBLE": "可抢占",
    "NODES": "节点",
    "OPTION": "选项",
    "STARTED (UTC)": "开始时间 (UTC)",
    "FINISHED (UTC)": "结束时间 (UTC)",
    "COST": "费用",
    "COST ({currency})": "费用 ({currency})",
    "REASON": "原因",
    "SLUG": "标识",
    "ROLE": "角色",
    "INDEX": "序号",
    "NODE": "节点",
    "GPUS": "GPU",
    "HOLDS": "占用",
    "STARTED": "开始时间",
    "ENDED": "结束时间",
    "TIME (UTC)": "时间 (UTC)",
    "KIND": "类别",
    "SHARING": "共享方式",
    "VENDOR": "厂商",
    "GPU MODEL": "GPU 型号",
    "POOL": "资源池",
    "RESOURCE": "资源类别",
    "SPOT": "竞价",
    "WHEN": "开始",
    "PRICE/H ({currency})": "每小时价格 ({currency})",
    "PRICE/H OFF-PEAK ({currency})": "谷时每小时价格 ({currency})",
    "ESTIMATE ({currency})": "估算 ({currency})",
    "CHEAPEST": "最便宜",
    "DESERVED": "应得配额",
    "LIMIT": "上限",
    "ALLOCATED": "已分配",
    "FAIR SHARE": "公平份额",
    "PENDING": "等待中",
    "JOB": "作业",
    "DAY": "日期",
    "USER": "用户",
    "GROUP": "分组",
    "GPU-H": "GPU 小时",
    "USED GPU-H": "已使用 GPU 小时",
    "IDLE GPU-H": "空闲 GPU 小时",
    "EXCLUSIVE GPU-H": "独占 GPU 小时",
    "CPU CORE-H": "CPU 核时",
    "MEMORY GIB-H": "内存 GiB 小时",
    "LIST COST": "目录价费用",
    "EXCLUSIVE COST": "独占费用",
    "TOTAL": "合计",
    "SLICE": "切分",
    "IDLE": "空闲",
    "COST/1K": "每千次请求费用",
    "ENDPOINT": "端点",
    "REQUESTS": "请求数",
    "COLD STARTS": "冷启动",
    "GPU-S/REQ": "每请求 GPU 秒",
    "SCALE REASON": "扩缩容原因",
    "DESIRED": "期望副本",
    # gpuctl config
    "config file": "配置文件",
    "profile": "配置档",
    "url": "URL",
    "token": "令牌",
    "{path} (none yet)": "{path}（尚不存在）",
    "default": "默认",
    "profile {name}": "配置档 {name}",
    "DEFAULT": "默认",
    "PROFILE": "配置档",
    "TOKEN": "令牌",
    "nothing": "无",
    "profile {name} in {path}: set {changed}": "{path} 中的配置档 {name}：已设置 {changed}",
    "; it is the default": "；它是默认配置档",
    "default profile: {name} ({path})": "默认配置档：{name}（{path}）",
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
