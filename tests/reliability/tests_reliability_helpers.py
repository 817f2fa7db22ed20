"""Helpers shared by the reliability tests."""

from asgiref.sync import async_to_sync


def response_body(response) -> bytes:
    """The whole body, streamed or not, so an error inside a stream shows too."""
    if not response.streaming:
        return response.content
    if not response.is_async:
        return b"".join(response.streaming_content)

    async def collect():
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()
