"""Where gpuctl's URL, token and workspace come from: flags, the environment, a profile of the
config file, the file's top level, the default URL (highest first; an empty value counts as unset).

The file is `$XDG_CONFIG_HOME/gpuctl/config.toml` (default `~/.config/gpuctl/config.toml`):

    url = "http://127.0.0.1:8000"          # used when a profile leaves it out
    default_profile = "prod"               # the profile used without --profile / GPUCTL_PROFILE

    [profiles.prod]
    url = "https://gpu.example.com"
    token = "gpt_..."
    workspace = "vision-lab"
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from gpuctl.errors import CliError

DEFAULT_URL = "http://127.0.0.1:8000"
CONFIG_KEYS = ("url", "token", "workspace")
FILE_KEYS = (*CONFIG_KEYS, "default_profile", "profiles")
ENV_PREFIX = "GPUCTL_"
PROFILE_ENV = ENV_PREFIX + "PROFILE"


@dataclass(frozen=True)
class Settings:
    url: str
    token: str | None
    workspace: str | None
    config_file: Path
    profile: str | None = None
    # key -> where its value came from ("--url", "GPUCTL_TOKEN", "profile prod", "config file", "default")
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    top: dict[str, str]
    profiles: dict[str, dict[str, str]]
    default_profile: str | None
    exists: bool


def config_file_path(env: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/gpuctl/config.toml`; the XDG spec ignores a relative XDG_CONFIG_HOME."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        base = Path(env["HOME"]) / ".config" if env.get("HOME") else Path.home() / ".config"
    return base / "gpuctl" / "config.toml"


def _load_toml(path: Path) -> dict[str, Any] | None:
    """The file's TOML document; None when there is no file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise CliError(f"{path}: invalid TOML: {error}") from None


def _settings_table(path: Path, where: str, table: Mapping[str, Any], known: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, value in table.items():
        if key not in known:
            raise CliError(f"{path}: {where}unknown key {key!r} (known: {', '.join(known)})")
        if key == "profiles":
            continue
        if not isinstance(value, str):
            raise CliError(f"{path}: {where}{key} must be a string, not {type(value).__name__}")
        if value.strip():
            values[key] = value.strip()
    return values


def read_config_file(path: Path) -> ConfigFile:
    """The file's settings and profiles; a missing file is none, a broken one an error naming it."""
    data = _load_toml(path)
    if data is None:
        return ConfigFile(path, {}, {}, None, exists=False)
    top = _settings_table(path, "", data, FILE_KEYS)
    raw_profiles = data.get("profiles", {})
    if not isinstance(raw_profiles, dict):
        raise CliError(f"{path}: profiles must be tables such as [profiles.NAME]")
    profiles = {}
    for name, table in raw_profiles.items():
        if not isinstance(table, dict):
            raise CliError(f"{path}: profiles.{name} must be a table ([profiles.{name}])")
        profiles[name] = _settings_table(path, f"profiles.{name}: ", table, CONFIG_KEYS)
    return ConfigFile(path, {k: v for k, v in top.items() if k in CONFIG_KEYS}, profiles,
                      top.get("default_profile"), exists=True)


def chosen_profile(config: ConfigFile, flag: str | None, env: Mapping[str, str]) -> tuple[str | None, str]:
    """(the profile, what chose it): --profile, then GPUCTL_PROFILE, then the file's default_profile."""
    for name, source in ((flag, "--profile"), (env.get(PROFILE_ENV), PROFILE_ENV),
                         (config.default_profile, "default_profile")):
        if name and name.strip():
            name = name.strip()
            if name not in config.profiles:
                known = ", ".join(sorted(config.profiles)) or "none"
                where = config.path if config.exists else f"{config.path} (no such file)"
                raise CliError(f"no profile {name!r} ({source}) in {where}; profiles: {known}")
            return name, source
    return None, ""


def resolve_settings(flags: Mapping[str, str | None], env: Mapping[str, str]) -> Settings:
    """Flags over environment over the chosen profile over the file's top level over the default URL."""
    path = config_file_path(env)
    config = read_config_file(path)
    profile, _ = chosen_profile(config, flags.get("profile"), env)
    in_profile = config.profiles.get(profile, {}) if profile else {}
    sources: dict[str, str] = {}

    def pick(key: str) -> str | None:
        env_name = ENV_PREFIX + key.upper()
        for value, source in ((flags.get(key), f"--{key}"), (env.get(env_name), env_name),
                              (in_profile.get(key), f"profile {profile}"), (config.top.get(key), str(path))):
            if value and value.strip():
                sources[key] = source
                return value.strip()
        return None

    url = pick("url")
    if url is None:
        url, sources["url"] = DEFAULT_URL, "default"
    url = url.rstrip("/")
    check_url(url)
    return Settings(url=url, token=pick("token"), workspace=pick("workspace"), config_file=path,
                    profile=profile, sources=sources)


def check_url(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise CliError(f"the URL {url!r} must start with http:// or https://")


# --------------------------------------------------------------------------- writing profiles


def update_config_file(path: Path, *, profile: str | None = None, values: Mapping[str, str] | None = None,
                       default_profile: str | None = None) -> None:
    """Set `values` in [profiles.PROFILE] and/or `default_profile`, keeping everything else.
    The file is written whole (its comments are not kept), readable by its owner only: it holds tokens."""
    read_config_file(path)  # refuse to rewrite a file that is already wrong
    data = _load_toml(path) or {}
    if profile is not None:
        table = data.setdefault("profiles", {}).setdefault(profile, {})
        table.update({key: value for key, value in (values or {}).items() if value})
    if default_profile is not None:
        if default_profile not in data.get("profiles", {}):
            known = ", ".join(sorted(data.get("profiles", {}))) or "none"
            raise CliError(f"no profile {default_profile!r} in {path}; profiles: {known}")
        data["default_profile"] = default_profile
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".toml")
    except OSError as error:
        raise CliError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            tomli_w.dump(data, out)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise CliError(f"cannot write {path}: {error.strerror or error}") from None
