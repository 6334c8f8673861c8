"""The test project's app: orders, and the job that ships one."""
