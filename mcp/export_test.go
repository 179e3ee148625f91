package mcp

// ToolPermission is toolPermission, for the tests.
var ToolPermission = toolPermission
