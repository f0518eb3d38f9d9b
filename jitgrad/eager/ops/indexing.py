"""(being written)"""

from typing import Any

__all__: list[str] = []

METHODS: dict[str, Any] = {}
