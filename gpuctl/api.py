"""The platform's REST API over HTTP, every failure turned into one line the user can act on."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from gpuctl.errors import CliError, SpecRefused, one_line
from gpuctl.settings import ENV_PREFIX, Settings

TIMEOUT_S = 30.0
# the words of the API's catch-all 404 (portal/api/errors.py): the path names no operation
NO_OPERATION = "no API operation at "


class Api:
    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None,
                 accept_language: str = "en"):
        self.settings = settings
        # the server's error titles and details in the reader's language
        headers = {"Accept": "application/json", "User-Agent": "gpuctl", "Accept-Language": accept_language}
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        self.http = httpx.Client(base_url=settings.url, headers=headers, timeout=TIMEOUT_S, transport=transport)

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, *, not_found: str, body: dict | None = None,
             params: dict | None = None, spec_file: str | None = None, files: dict | None = None) -> Any:
        """The JSON answer of a 2xx; `not_found` is the message for the API's own 404, and
        `spec_file` turns the errors of a 400 or 422 into `FILE:LINE:COL` lines (exit 2). With `files`
        the body goes as multipart form fields beside them."""
        self._need_token()
        sent = {"files": files, "data": body} if files is not None else {"json": body}
        try:
            response = self.http.request(method, path, params=params, **sent)
        except httpx.TimeoutException:
            raise CliError(f"cannot reach {self.settings.url}: no answer within {TIMEOUT_S:g} s") from None
        except httpx.HTTPError as error:
            raise CliError(f"cannot reach {self.settings.url}: {error}") from None
        if response.status_code == 204:  # a DELETE's answer: nothing to read
            return None
        if response.is_success:
            return self._json(response)
        raise self._failure(response, not_found=not_found, spec_file=spec_file)

    def stream_text(self, path: str, *, not_found: str, params: dict | None = None,
                    follow: bool = False) -> Iterator[str]:
        """A text/plain answer as it arrives; a follow stream may stay quiet a long time between lines."""
        self._need_token()
        timeout = httpx.Timeout(TIMEOUT_S, read=None) if follow else TIMEOUT_S
        try:
            with self.http.stream("GET", path, params=params, headers={"Accept": "text/plain"},
                                  timeout=timeout) as response:
                if not response.is_success:
                    response.read()
                    raise self._failure(response, not_found=not_found, spec_file=None)
                yield from response.iter_text()
        except httpx.TimeoutException:
            raise CliError(f"cannot reach {self.settings.url}: no answer within {TIMEOUT_S:g} s") from None
        except httpx.HTTPError as error:
            raise CliError(f"cannot reach {self.settings.url}: {error}") from None

    def get_all(self, path: str, *, not_found: str, params: dict | None = None) -> list[dict]:
        """Every item of a list, following the LimitOffsetPagination `next` links."""
        answer = self.call("GET", path, not_found=not_found, params=params)
        if isinstance(answer, list):
            return answer
        if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
            raise CliError(f"{self.settings.url} answered {path} with something that is not a list")
        items = list(answer["results"])
        while answer.get("next"):
            answer = self.call("GET", answer["next"], not_found=not_found)
            items.extend(answer["results"])
        return items

    def _need_token(self) -> None:
        if not self.settings.token:
            raise CliError(
                f"no API token: pass --token, set {ENV_PREFIX}TOKEN or put token in "
                f"{self.settings.config_file}; create one at {self.tokens_page}"
            )

    @property
    def tokens_page(self) -> str:
        return f"{self.settings.url}/account/tokens/"

    def _absolute(self, text: str) -> str:
        """The server's words name pages by path (`/account/tokens/`); the user needs the whole URL."""
        return re.sub(r"(?<![\w/.:-])(/account/tokens/)", lambda _: self.tokens_page, text)

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code == 204:  # done, nothing to say (a DELETE)
            return None
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"{self.settings.url} answered {response.status_code} with something that is not JSON "
                f"(is it the GPU platform?)"
            ) from None

    def _failure(self, response: httpx.Response, *, not_found: str, spec_file: str | None) -> CliError:
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
        method, path = response.request.method, response.request.url.path
        if status == 401:  # no token, a wrong one, a revoked or expired one: the server says which
            why = self._absolute(problem_detail(data).rstrip("."))
            if self.tokens_page in why:
                return CliError(f"token refused: {why}")
            return CliError(f"token refused{': ' + why if why else ''}; create one at {self.tokens_page}")
        if status == 404:
            if data is None or problem_detail(data).startswith(NO_OPERATION):
                return CliError(f"{self.settings.url} has no {method} {path} "
                                f"(a server without this API, or a wrong --url)")
            if _names_a_field(data):  # a parameter names something missing, not the object in the path
                return CliError(error_message(data))
            return CliError(not_found)
        if status in (400, 422) and spec_file is not None and isinstance(data, dict) and data.get("errors"):
            # 400: the spec is wrong; 422: no pool can run it; either way the spec must change
            return SpecRefused([one_line(spec_error_line(spec_file, error)) for error in data["errors"]])
        retry = response.headers.get("Retry-After")
        later = f" (retry in {retry} s)" if retry and retry.isdigit() and status in (429, 503) else ""
        if status == 403:  # a role that may not, or a token whose scope does not reach
            words = self._absolute(error_message(data) if data is not None else response.reason_phrase)
            hint = f"; tokens: {self.tokens_page}" if _about_tokens(data) and self.tokens_page not in words else ""
            return CliError(f"forbidden: {words.rstrip('.')}{hint}")
        if data is not None and status < 500:
            return CliError(error_message(data) + later)
        if isinstance(data, dict) and (data.get("detail") or data.get("title")):
            return CliError(f"server answered {status}: {problem_detail(data)}{later}")
        text = one_line(response.text)[:200] or response.reason_phrase
        return CliError(f"server answered {status}: {text}{later}")


def _names_a_field(data: Any) -> bool:
    errors = data.get("errors") if isinstance(data, dict) else None
    return isinstance(errors, list) and any(isinstance(e, dict) and e.get("field") for e in errors)


def _about_tokens(data: Any) -> bool:
    """A 403 about the token itself (its scope, its expiry), not about what the user may do."""
    if not isinstance(data, dict):
        return False
    words = " ".join(str(data.get(key) or "") for key in ("type", "title", "detail")).lower()
    return "token" in words or "scope" in words


def problem_detail(data: Any) -> str:
    """A problem document's `detail`, else its `title`; '' for anything else."""
    if not isinstance(data, dict):
        return ""
    return one_line(str(data.get("detail") or data.get("title") or ""))


def spec_error_line(spec_file: str, error: Mapping[str, Any]) -> str:
    """`job.yaml:7:3: MaxReplicas: ...`; the position or field is left out when the API has none."""
    where = spec_file
    if error.get("line") is not None:
        where += f":{error['line']}"
        if error.get("column") is not None:
            where += f":{error['column']}"
    field = f" {error['field']}:" if error.get("field") else ""
    return f"{where}:{field} {error.get('message', '')}".rstrip()


def error_message(data: Any) -> str:
    """The words of any error body the API sends, on one line: problem details' `errors` (else their
    `detail`, else `title`), DRF's `detail`, or field -> messages."""
    return one_line(_error_words(data))


def _error_words(data: Any) -> str:
    if isinstance(data, dict):
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            return "; ".join(
                f"{e['field']}: {e.get('message', '')}" if isinstance(e, dict) and e.get("field")
                else str(e.get("message", e) if isinstance(e, dict) else e)
                for e in errors
            )
        if data.get("detail") or data.get("title"):
            return str(data.get("detail") or data.get("title"))
        return "; ".join(f"{key}: {_error_words(value)}" for key, value in data.items()
                         if key not in ("type", "status", "errors", "instance"))
    if isinstance(data, list):
        return " ".join(_error_words(item) for item in data)
    return str(data)
