"""`gpuctl login [--scope read|submit|manage] [--url URL] [--profile NAME]`: sign in from the browser with
the OAuth 2.0 device authorization grant (RFC 8628), and save the API token in the config file as
`gpuctl config set-profile NAME --url URL --token TOKEN` would.

gpuctl asks `/api/v1/auth/device/` for a code, shows it with the page to type it at (`/device/` of the portal),
and polls `/api/v1/auth/device/token/` every `interval` seconds (more after a slow_down) until the person
approves or denies it there, or it expires. The profile: --profile, else GPUCTL_PROFILE, else the file's
default profile, else "default" (made the default when the file has none)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import httpx

from gpuctl.errors import EXIT_OK, CliError
from gpuctl.settings import (
    DEFAULT_URL,
    ENV_PREFIX,
    PROFILE_ENV,
    check_url,
    config_file_path,
    read_config_file,
    update_config_file,
)

SCOPES = ("read", "submit", "manage")
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
TIMEOUT_S = 30.0
sleep = time.sleep  # the wait between polls (a test's clock replaces it)


def add_login_command(commands, command: Callable[..., argparse.ArgumentParser]) -> None:
    login = command(commands, "login", cmd_login,
                    "sign in from the browser with a code and save the API token in the config file", settings=False)
    login.add_argument("--scope", choices=SCOPES, default="submit",
                       help="what the token may do: read, submit (default) or manage")


def _profile_and_url(run) -> tuple[str, str, bool]:
    """(the profile to write, the platform's URL, whether the profile becomes the default)."""
    config = read_config_file(config_file_path(run.env))
    chosen = [name.strip() for name in (getattr(run.args, "profile", None), run.env.get(PROFILE_ENV),
                                        config.default_profile) if name and name.strip()]
    profile = chosen[0] if chosen else "default"
    in_profile = config.profiles.get(profile, {})
    urls = (getattr(run.args, "url", None), run.env.get(ENV_PREFIX + "URL"), in_profile.get("url"),
            config.top.get("url"))
    url = next((u.strip() for u in urls if u and u.strip()), DEFAULT_URL).rstrip("/")
    check_url(url)
    return profile, url, config.default_profile is None


def _post(http: httpx.Client, url: str, path: str, body: dict) -> httpx.Response:
    try:
        return http.post(path, json=body)
    except httpx.TimeoutException:
        raise CliError(f"cannot reach {url}: no answer within {TIMEOUT_S:g} s") from None
    except httpx.HTTPError as error:
        raise CliError(f"cannot reach {url}: {error}") from None


def _json(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise CliError(f"{url} answered HTTP {response.status_code} without JSON: is it the platform's URL?")
    return data


def cmd_login(run) -> int:
    profile, url, make_default = _profile_and_url(run)
    headers = {"Accept": "application/json", "User-Agent": "gpuctl"}
    with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_S) as http:
        started = _post(http, url, "/api/v1/auth/device/", {"client_id": "gpuctl", "scope": run.args.scope})
        codes = _json(started, url)
        if started.status_code != 200 or "device_code" not in codes:
            raise CliError(f"{url} refused to start a sign-in: HTTP {started.status_code} "
                           f"{codes.get('detail') or codes.get('title') or ''}".rstrip())
        run.note(run.say("Open {uri} and type the code {code}", uri=codes["verification_uri"], code=codes["user_code"]))
        run.note(run.say("(or open {uri})", uri=codes["verification_uri_complete"]))
        run.note(run.say("waiting for the approval ..."))
        token = _poll(run, http, url, codes)
    update_config_file(config_file_path(run.env), profile=profile, values={"url": url, "token": token["access_token"]},
                       default_profile=profile if make_default else None)
    run.print(run.say("signed in to {url} as {username} (scope {scope}); token saved in profile {profile} of {path}",
                      url=url, username=token.get("username", "?"), scope=token.get("scope", run.args.scope),
                      profile=profile, path=config_file_path(run.env)))
    if run.env.get(ENV_PREFIX + "TOKEN"):
        run.note(run.say("note: {name} is set and wins over the saved token", name=ENV_PREFIX + "TOKEN"))
    return EXIT_OK


def _poll(run, http: httpx.Client, url: str, codes: dict[str, Any]) -> dict[str, Any]:
    interval = max(1, int(codes.get("interval") or 5))
    waited, expires_in = 0, int(codes.get("expires_in") or 600)
    body = {"device_code": codes["device_code"], "grant_type": GRANT_TYPE}
    while waited <= expires_in:
        sleep(interval)
        waited += interval
        response = _post(http, url, "/api/v1/auth/device/token/", body)
        if response.status_code == 429:  # the rate limit: wait as told
            interval = max(interval, int(response.headers.get("Retry-After") or interval))
            continue
        answer = _json(response, url)
        if response.status_code == 200 and answer.get("access_token"):
            return answer
        error = answer.get("error")
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += 5
            continue
        if error == "access_denied":
            raise CliError(run.say("the sign-in was denied in the browser"))
        if error == "expired_token":
            raise CliError(run.say("the code expired before it was approved: run gpuctl login again"))
        raise CliError(f"{url}: {answer.get('error_description') or error or f'HTTP {response.status_code}'}")
    raise CliError(run.say("the code expired before it was approved: run gpuctl login again"))
