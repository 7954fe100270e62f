"""Fakes of outside services, each written from the service's documentation and checking every
request against it (method, path, authentication, content type, body)."""
