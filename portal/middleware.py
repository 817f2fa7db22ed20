"""Pages' one mapping from a refused request (DomainError) to HTTP: a styled error page."""

from django.shortcuts import render

from scheduling.errors import DomainError


class DomainErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DomainError):
            return None
        return render(request, "error.html", {"error": exception, "errors": exception.to_dicts()},
                      status=exception.status)
