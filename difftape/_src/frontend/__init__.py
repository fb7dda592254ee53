"""Frontend: Python source → typed IR (parse, fence, resolve, type, lower)."""
