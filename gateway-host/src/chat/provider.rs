//! The agent's LLM: any OpenAI-compatible Chat Completions endpoint (SPEC R34) — Ollama, vLLM,
//! llama.cpp's server, OpenAI — asked with `stream: true`, its server-sent events read with a
//! maintained SSE parser (`eventsource-stream`), text deltas handed out as they come and tool
//! calls assembled from their streamed pieces.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::settings::Settings;

/// `Agent.*`: where the model is and how the agent uses it.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `…/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub system_prompt: String,
    pub max_tool_rounds: usize,
    /// `Agent.MaxHistoryBytes`: the most of a session's earlier turns sent to the model, in bytes
    /// of JSON (`None`: all of them; see `store::ModelHistory::recent`).
    pub max_history_bytes: Option<usize>,
    pub timeout: Duration,
}

/// 128 KiB of JSON: roughly 32,000 tokens, within the context window of today's common models
/// with room left for the tools and the answer.
const DEFAULT_MAX_HISTORY_BYTES: u64 = 128 * 1024;

const DEFAULT_SYSTEM_PROMPT: &str = "You are the assistant of an MCP App gateway. Use the tools of the hosted apps to answer; \
say plainly when a tool fails.";

impl AgentConfig {
    /// The configuration, or why there is none: the message names the keys to set.
    pub fn from_settings(settings: &Settings) -> Result<AgentConfig, String> {
        let base_url = settings.get_str("Agent:BaseUrl").filter(|s| !s.trim().is_empty());
        let model = settings.get_str("Agent:Model").filter(|s| !s.trim().is_empty());
        let (Some(base_url), Some(model)) = (base_url, model) else {
            return Err("no LLM provider is configured: set Agent.BaseUrl (an OpenAI-compatible endpoint such as \
                        http://127.0.0.1:11434/v1) and Agent.Model, and Agent.ApiKeyEnv if it needs a key"
                .to_string());
        };
        let api_key = settings.get_str("Agent:ApiKeyEnv").and_then(|var| std::env::var(var).ok()).filter(|k| !k.is_empty());
        let number = |key: &str| settings.get_str(key).and_then(|v| v.parse::<u64>().ok());
        Ok(AgentConfig {
            base_url: base_url.trim_end_matches('/').to_string(),
            model,
            api_key,
            system_prompt: settings.get_str("Agent:SystemPrompt").unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_string()),
            max_tool_rounds: number("Agent:MaxToolRounds").unwrap_or(8).max(1) as usize,
            max_history_bytes: match number("Agent:MaxHistoryBytes").unwrap_or(DEFAULT_MAX_HISTORY_BYTES) {
                0 => None,
                bytes => Some(bytes as usize),
            },
            timeout: Duration::from_secs(number("Agent:TimeoutSeconds").unwrap_or(120).max(1)),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the LLM provider at {url} cannot be reached: {message}")]
    Unreachable { url: String, message: String },
    #[error("the LLM provider answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the LLM provider's stream is malformed: {0}")]
    Malformed(String),
    #[error("the LLM provider did not finish within {0:?}")]
    Timeout(Duration),
}

/// A tool call the model asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    pub id: String,
    /// The provider-safe name.
    pub name: String,
    /// JSON text, as the model wrote it.
    pub arguments: String,
}

/// One completed answer of the model.
#[derive(Debug, Default)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
}

impl Completion {
    /// The assistant message for the history.
    pub fn message(&self) -> Value {
        let mut message = json!({ "role": "assistant", "content": if self.text.is_empty() { Value::Null } else { json!(self.text) } });
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
                .collect();
        }
        message
    }
}

pub struct Provider {
    http: reqwest::Client,
    config: AgentConfig,
    /// `{base_url}/chat/completions`, and that URL parsed once (a URL that does not parse is
    /// left to the request to report, as it always was).
    url: String,
    parsed_url: Option<reqwest::Url>,
}

impl Provider {
    /// One client for the gateway's life: its pool keeps connections to the model open between
    /// requests (a turn makes at least two).
    pub fn new(config: AgentConfig) -> Provider {
        let http = reqwest::Client::builder().tcp_nodelay(true).build().unwrap_or_else(|_| reqwest::Client::new());
        let url = format!("{}/chat/completions", config.base_url);
        let parsed_url = reqwest::Url::parse(&url).ok();
        Provider { http, config, url, parsed_url }
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Asks the model for the next message; `on_text` gets each text delta as it arrives.
    /// `messages` are JSON texts — single messages, or several joined by commas (a session's
    /// history, see `store::ModelHistory`); empty ones are skipped. `tools` is the JSON array of
    /// tool definitions, or empty for none.
    pub async fn complete(&self, messages: &[&str], tools: &str, on_text: impl FnMut(&str)) -> Result<Completion, ProviderError> {
        let timeout = self.config.timeout;
        tokio::time::timeout(timeout, self.stream(messages, tools, on_text)).await.map_err(|_| ProviderError::Timeout(timeout))?
    }

    /// The request body, `{"model", "messages", "stream": true, "tools"?}`, by copying the texts.
    fn body(&self, messages: &[&str], tools: &str) -> Vec<u8> {
        let size = messages.iter().map(|m| m.len() + 1).sum::<usize>() + tools.len() + self.config.model.len() + 64;
        let mut body = Vec::with_capacity(size);
        body.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut body, &self.config.model).expect("a string serialises");
        body.extend_from_slice(b",\"messages\":[");
        for (i, message) in messages.iter().filter(|m| !m.is_empty()).enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(message.as_bytes());
        }
        body.extend_from_slice(b"],\"stream\":true");
        if !tools.is_empty() {
            body.extend_from_slice(b",\"tools\":");
            body.extend_from_slice(tools.as_bytes());
        }
        body.push(b'}');
        body
    }

    async fn stream(&self, messages: &[&str], tools: &str, mut on_text: impl FnMut(&str)) -> Result<Completion, ProviderError> {
        let url = &self.url;
        let request = match &self.parsed_url {
            Some(parsed) => self.http.post(parsed.clone()),
            None => self.http.post(url),
        };
        let mut request = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(self.body(messages, tools));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| ProviderError::Unreachable { url: url.clone(), message: e.to_string() })?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(ProviderError::Status { status: status.as_u16(), body: text.chars().take(500).collect() });
        }
        let mut events = response.bytes_stream().eventsource();
        let mut completion = Completion::default();
        let mut finished = false;
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| ProviderError::Malformed(e.to_string()))?;
            if event.data.trim() == "[DONE]" {
                finished = true;
                break;
            }
            let chunk: Value = serde_json::from_str(&event.data)
                .map_err(|e| ProviderError::Malformed(format!("a chunk is not JSON ({e}): {}", event.data.chars().take(200).collect::<String>())))?;
            if let Some(error) = chunk.get("error") {
                return Err(ProviderError::Malformed(format!("the provider reported an error: {error}")));
            }
            let Some(choice) = chunk["choices"].get(0) else { continue };
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                completion.text.push_str(text);
                on_text(text);
            }
            for piece in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = piece["index"].as_u64().unwrap_or(completion.tool_calls.len() as u64) as usize;
                if completion.tool_calls.len() <= index {
                    completion.tool_calls.resize(index + 1, ToolCall::default());
                }
                let call = &mut completion.tool_calls[index];
                if let Some(id) = piece["id"].as_str() {
                    call.id = id.to_string();
                }
                if let Some(name) = piece["function"]["name"].as_str() {
                    call.name.push_str(name);
                }
                if let Some(arguments) = piece["function"]["arguments"].as_str() {
                    call.arguments.push_str(arguments);
                }
            }
            if choice["finish_reason"].is_string() {
                finished = true;
            }
        }
        if !finished {
            return Err(ProviderError::Malformed("the stream ended before the answer was complete".into()));
        }
        for (i, call) in completion.tool_calls.iter_mut().enumerate() {
            if call.name.is_empty() {
                return Err(ProviderError::Malformed(format!("tool call {i} has no function name")));
            }
            if call.id.is_empty() {
                call.id = format!("call_{i}");
            }
        }
        Ok(completion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_the_json_the_texts_make() {
        let provider = Provider::new(AgentConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m\"odel".into(),
            api_key: None,
            system_prompt: String::new(),
            max_tool_rounds: 1,
            max_history_bytes: None,
            timeout: Duration::from_secs(1),
        });
        let system = json!({ "role": "system", "content": "be brief" }).to_string();
        let history = format!("{},{}", json!({ "role": "user", "content": "a" }), json!({ "role": "assistant", "content": "b" }));
        let new = json!({ "role": "user", "content": "c" }).to_string();
        let tools = json!([{ "type": "function", "function": { "name": "t", "parameters": { "type": "object" } } }]);
        let body: Value = serde_json::from_slice(&provider.body(&[&system, &history, &new], &tools.to_string())).unwrap();
        assert_eq!(
            body,
            json!({ "model": "m\"odel", "stream": true, "tools": tools, "messages": [
                { "role": "system", "content": "be brief" },
                { "role": "user", "content": "a" }, { "role": "assistant", "content": "b" },
                { "role": "user", "content": "c" },
            ] })
        );
        // No history, no tools.
        let body: Value = serde_json::from_slice(&provider.body(&[&system, "", &new], "")).unwrap();
        assert_eq!(body, json!({ "model": "m\"odel", "stream": true, "messages": [
            { "role": "system", "content": "be brief" }, { "role": "user", "content": "c" },
        ] }));
    }
}
