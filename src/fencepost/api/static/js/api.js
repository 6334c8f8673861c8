// The JSON API: fetch with the CSRF double-submit header, problem details as ApiError.

export const CSRF_COOKIE = "fencepost_csrf";

// -- the API -------------------------------------------------------------------------------

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decode(rest.join("="));
  }
  return "";
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    const token = cookie(CSRF_COOKIE);
    if (!token) {
      throw new ApiError(403, {
        title: "CSRF token missing",
        detail: "the page's fencepost_csrf cookie is gone: reload the page",
      });
    }
    headers["X-CSRF-Token"] = token;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, { title: "Service unreachable", detail: String(error.message || error) });
  }
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (!response.ok) {
    throw new ApiError(response.status, data || { title: response.statusText, detail: `HTTP ${response.status}` });
  }
  return data;
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const path = (...segments) => "/" + segments.map((s) => encodeURIComponent(s)).join("/");


// -- routing -------------------------------------------------------------------------------

// A hand-edited URL may hold a malformed escape ("%E0"): keep it as typed.
export function decode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
