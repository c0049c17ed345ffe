// grammar.cpp — grammar-constrained sampling: compiled grammars, a lane's
// grammar state, the single-token check and the full mask.
//
// A grammar is compiled (parsed, its rules and start stacks built) once, by
// sf_grammar_compile on any thread, into a table the tick reads under a
// mutex; an admission names it by id and its lane clones the compiled
// state, so the step loop never parses. Sampling checks the unconstrained
// choice against the grammar first (a one-candidate apply) and masks the
// whole vocabulary only when that choice is refused.
//
// We drive llama.cpp's grammar engine (llama-grammar.h: the parser, the
// pushdown stacks, apply and accept) directly rather than through
// llama_sampler_init_grammar: the sampler hides the stacks, and we need them
// to see that a grammar is complete (no stack left to extend). Lazy grammars
// are ours too. llama.cpp's lazy sampler runs std::regex_match over the whole
// output so far after every token — quadratic, and libstdc++'s recursive
// matcher overflows the stack on ~100 kB of text, a crash any long reply
// (a model's reasoning) reaches. Here a trigger pattern is searched for in
// the last SF_TRIGGER_WINDOW bytes of output only, with libstdc++'s
// polynomial (breadth-first) matcher: its recursion is bounded by the
// pattern, not the text, and no pattern backtracks exponentially (the
// binding also bounds a pattern's size: cgo/grammar.go).
// libstdc++ 12's <regex>, inlined at -O1 (the asan build), warns that a
// std::function inside its NFA may be used uninitialized: a false positive
// in the library's own code, located in its headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <regex>
#include <stdexcept>

#include "internal.h"
// llama.cpp's internal grammar API (llama/llama.cpp/src, reached from its
// include directory, which is on every build's include path).
#include "../src/llama-grammar.h"

namespace {

// A trigger pattern must match within this many bytes at the end of the
// output: the search's cost and its matcher's recursion stay bounded.
constexpr size_t SF_TRIGGER_WINDOW = 256;

// The most pushdown stacks a grammar may hold at once. Each is one way the
// output so far can be parsed; an ambiguous grammar (nested repetitions
// such as ("a"{0,2000}){0,2000}) multiplies them with every character, and
// every check and mask walks them all — that grammar alone would stall the
// tick for minutes. Grammars a schema converter writes hold a handful.
constexpr size_t SF_MAX_GRAMMAR_STACKS = 128;

// The most rules with two or more alternatives that match the empty text.
// Such a rule parses nothing in two ways; llama.cpp lowers a counted
// repetition of something that may be empty (("a"{0,9}){0,2000}) into a
// chain of them, and the first character then wakes every combination of
// the chain — seconds inside one accept, before any bound on the stacks
// can look. A grammar written to be read has a few at most.
constexpr size_t SF_MAX_AMBIGUOUS_RULES = 32;

bool is_alt_end(const llama_grammar_element &el) {
    return el.type == LLAMA_GRETYPE_END || el.type == LLAMA_GRETYPE_ALT;
}

// How many rules have more than one alternative that may be empty.
size_t ambiguous_rules(const llama_grammar_rules &rules) {
    std::vector<bool> nullable(rules.size(), false);
    // An alternative may be empty when every element in it is a rule that
    // may be; iterate to the fixpoint.
    auto alt_nullable = [&](const llama_grammar_rule &r, size_t &i) {
        bool ok = true;
        for (; !is_alt_end(r[i]); i++) {
            const llama_grammar_element &el = r[i];
            ok = ok && el.type == LLAMA_GRETYPE_RULE_REF && el.value < rules.size() && nullable[el.value];
        }
        return ok;
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t k = 0; k < rules.size(); k++) {
            const llama_grammar_rule &r = rules[k];
            for (size_t i = 0; !nullable[k] && i < r.size(); i++) {
                if (alt_nullable(r, i)) {
                    nullable[k] = changed = true;
                }
                if (r[i].type == LLAMA_GRETYPE_END) {
                    break;
                }
            }
        }
    }
    size_t n = 0;
    for (const llama_grammar_rule &r : rules) {
        size_t empty_alts = 0;
        for (size_t i = 0; i < r.size(); i++) {
            empty_alts += alt_nullable(r, i) ? 1 : 0;
            if (r[i].type == LLAMA_GRETYPE_END) {
                break;
            }
        }
        n += empty_alts > 1 ? 1 : 0;
    }
    return n;
}

void check_ambiguity(const llama_grammar *g) {
    if (g->stacks.size() > SF_MAX_GRAMMAR_STACKS) {
        throw std::runtime_error("the grammar is too ambiguous: more than 128 parses of the output at once");
    }
}

bool all_stacks_empty(const llama_grammar *g) {
    for (const auto &s : g->stacks) {
        if (!s.empty()) {
            return false;
        }
    }
    return true;
}

}  // namespace

struct sf_grammar_compiled {
    llama_grammar *base = nullptr;  // the start state; lanes clone it
    bool lazy = false;
    std::vector<std::regex> patterns;
    std::vector<llama_token> trigger_tokens;
    ~sf_grammar_compiled() { llama_grammar_free_impl(base); }
};

void sf_grammar_state::reset() noexcept {
    llama_grammar_free_impl(g);
    g = nullptr;
    compiled.reset();
    awaiting = false;
    window.clear();
}

namespace {

int compile(sf_engine *e, const char *text, const char *root, int32_t lazy, const char *const *patterns,
            int32_t n_patterns, const int32_t *tokens, int32_t n_tokens, uint32_t *id, char *err, int32_t err_cap) {
    if (text == nullptr || text[0] == '\0' || id == nullptr || n_patterns < 0 || n_tokens < 0 ||
        (n_patterns > 0 && patterns == nullptr) || (n_tokens > 0 && tokens == nullptr)) {
        sf_set_err(err, err_cap, "grammar", "empty grammar or malformed arguments");
        return SF_ERR_INVALID;
    }
    if (root == nullptr || root[0] == '\0') {
        root = "root";
    }
    if (!lazy && (n_patterns > 0 || n_tokens > 0)) {
        sf_set_err(err, err_cap, "grammar", "triggers on a grammar that is not lazy");
        return SF_ERR_GRAMMAR;
    }
    if (lazy && n_patterns == 0 && n_tokens == 0) {
        sf_set_err(err, err_cap, "grammar", "a lazy grammar without a trigger");
        return SF_ERR_GRAMMAR;
    }
    auto c = std::make_shared<sf_grammar_compiled>();
    c->lazy = lazy != 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab) {
            sf_set_err(err, err_cap, "grammar", "trigger token outside the vocabulary");
            return SF_ERR_GRAMMAR;
        }
        c->trigger_tokens.push_back(tokens[i]);
    }
    for (int32_t i = 0; i < n_patterns; i++) {
        if (patterns[i] == nullptr || patterns[i][0] == '\0') {
            sf_set_err(err, err_cap, "grammar", "empty trigger pattern");
            return SF_ERR_GRAMMAR;
        }
        try {
            c->patterns.emplace_back(patterns[i], std::regex::ECMAScript | std::regex_constants::__polynomial);
        } catch (const std::regex_error &x) {
            sf_set_err(err, err_cap, "grammar: trigger pattern", x.what());
            return SF_ERR_GRAMMAR;
        }
    }
    // The parser reports a refusal by printing it and returning null; a
    // missing start rule throws out_of_range. Both are the caller's grammar.
    try {
#if SF_LLAMA_UPSTREAM
        c->base = llama_grammar_init_impl(e->vocab, text, root, false, nullptr, 0, nullptr, 0);
#else
        // ollama's copy takes its own vocabulary as a second, optional argument.
        c->base = llama_grammar_init_impl(e->vocab, nullptr, text, root, false, nullptr, 0, nullptr, 0);
#endif
    } catch (const std::exception &x) {
        sf_set_err(err, err_cap, "grammar", x.what());
        return SF_ERR_GRAMMAR;
    }
    if (c->base == nullptr) {
        sf_set_err(err, err_cap, "grammar", "llama.cpp's parser refused the grammar");
        return SF_ERR_GRAMMAR;
    }
    if (ambiguous_rules(c->base->rules) > SF_MAX_AMBIGUOUS_RULES) {
        sf_set_err(err, err_cap, "grammar",
                   "too ambiguous: more than 32 rules match the empty text in two ways (a repetition of something "
                   "that may be empty?)");
        return SF_ERR_GRAMMAR;
    }
    if (c->base->stacks.size() > SF_MAX_GRAMMAR_STACKS) {
        sf_set_err(err, err_cap, "grammar", "too ambiguous: more than 128 ways to start");
        return SF_ERR_GRAMMAR;
    }
    std::lock_guard<std::mutex> lock(e->grammar_mu);
    uint32_t next = e->next_grammar + 1;
    while (next == 0 || e->grammars.count(next) != 0) {
        next++;
    }
    e->next_grammar = next;
    e->grammars.emplace(next, std::move(c));
    *id = next;
    return SF_OK;
}

// Appends a token's bytes to the trigger window, keeping its last
// SF_TRIGGER_WINDOW bytes, and returns where the piece starts in it.
size_t window_append(sf_engine *e, sf_grammar_state *s, llama_token tok) {
    char buf[256];
    int32_t n = llama_token_to_piece(e->vocab, tok, buf, (int32_t)sizeof buf, 0, true);
    std::string piece;
    if (n >= 0) {
        piece.assign(buf, (size_t)n);
    } else {
        piece.resize((size_t)-n);
        n = llama_token_to_piece(e->vocab, tok, piece.data(), (int32_t)piece.size(), 0, true);
        piece.resize((size_t)std::max(n, 0));
    }
    s->window += piece;
    if (s->window.size() > SF_TRIGGER_WINDOW) {
        s->window.erase(0, s->window.size() - SF_TRIGGER_WINDOW);
    }
    return s->window.size() >= piece.size() ? s->window.size() - piece.size() : 0;
}

// A lazy grammar waiting for its trigger sees tok: starts the grammar if
// tok is a trigger token or the output now holds a trigger pattern (the
// grammar then takes the text from the match — its first non-empty group,
// or the whole match — on).
void await_trigger(sf_engine *e, sf_grammar_state *s, llama_token tok) {
    const sf_grammar_compiled &c = *s->compiled;
    if (std::find(c.trigger_tokens.begin(), c.trigger_tokens.end(), tok) != c.trigger_tokens.end()) {
        s->awaiting = false;
        s->window.clear();
        llama_grammar_accept_impl(*s->g, tok);
        return;
    }
    if (c.patterns.empty()) {
        return;
    }
    window_append(e, s, tok);
    std::smatch m;
    for (const std::regex &re : c.patterns) {
        if (!std::regex_search(s->window, m, re)) {
            continue;
        }
        size_t start = (size_t)m.position(0);
        for (size_t i = 1; i < m.size(); i++) {
            if (m.length(i) > 0) {
                start = (size_t)m.position(i);
                break;
            }
        }
        std::string constrained = s->window.substr(start);
        s->awaiting = false;
        s->window.clear();
        if (!constrained.empty()) {
            llama_grammar_accept_str(*s->g, constrained);
        }
        return;
    }
}

}  // namespace

bool sf_grammar_allows(sf_grammar_state *s, llama_token tok) {
    if (s->awaiting) {
        return true;
    }
    llama_token_data one = {tok, 0.0f, 0.0f};
    llama_token_data_array arr = {&one, 1, -1, false};
    llama_grammar_apply_impl(*s->g, &arr);
    return !(std::isinf(one.logit) && one.logit < 0);
}

void sf_grammar_mask(sf_grammar_state *s, llama_token_data_array *c) {
    if (!s->awaiting) {
        llama_grammar_apply_impl(*s->g, c);
    }
}

bool sf_grammar_accept(sf_engine *e, sf_grammar_state *s, llama_token tok) {
    if (s->awaiting) {
        await_trigger(e, s, tok);
    } else {
        llama_grammar_accept_impl(*s->g, tok);
    }
    check_ambiguity(s->g);
    return !s->awaiting && all_stacks_empty(s->g);
}

int sf_lane_build_grammar(sf_engine *e, sf_lane *l, const sf_admit *a) {
    if (a->grammar == 0) {
        if (a->grammar_replay != 0) {
            return sf_fail_lane(e, a->lane, SF_ERR_INVALID, "admit lane %u: grammar replay without a grammar", a->lane);
        }
        return SF_OK;
    }
    if (a->grammar_replay > a->prompt_len) {
        return sf_fail_lane(e, a->lane, SF_ERR_INVALID, "admit lane %u: grammar replay of %u tokens past its %u-token prompt",
                            a->lane, a->grammar_replay, a->prompt_len);
    }
    std::shared_ptr<const sf_grammar_compiled> c;
    {
        std::lock_guard<std::mutex> lock(e->grammar_mu);
        auto it = e->grammars.find(a->grammar);
        if (it != e->grammars.end()) {
            c = it->second;
        }
    }
    if (c == nullptr) {
        return sf_fail_lane(e, a->lane, SF_ERR_GRAMMAR, "admit lane %u: unknown grammar %u", a->lane, a->grammar);
    }
    sf_grammar_state &s = l->grammar;
    s.g = llama_grammar_clone_impl(*c->base);
    s.compiled = c;
    s.awaiting = c->lazy;
    // A resumed lane's reply so far is the tail of its prompt: the grammar
    // walks it again, refusing a reply it would not have allowed.
    const llama_token *reply = l->prompt.data() + (l->prompt.size() - a->grammar_replay);
    for (uint32_t i = 0; i < a->grammar_replay; i++) {
        llama_token t = reply[i];
        bool ok = !llama_vocab_is_eog(e->vocab, t) && sf_grammar_allows(&s, t);
        if (ok) {
            try {
                ok = !sf_grammar_accept(e, &s, t) || i + 1 == a->grammar_replay;
            } catch (const std::exception &) {
                ok = false;
            }
        }
        if (!ok) {
            s.reset();
            return sf_fail_lane(e, a->lane, SF_ERR_GRAMMAR,
                                "admit lane %u: replayed token %u of %u (%d) does not follow the grammar", a->lane, i,
                                a->grammar_replay, t);
        }
    }
    return SF_OK;
}

void sf_grammar_table_clear(sf_engine *e) {
    std::lock_guard<std::mutex> lock(e->grammar_mu);
    e->grammars.clear();
}

int sf_grammar_compile(sf_engine *e, const char *text, const char *root, int32_t lazy, const char *const *patterns,
                       int32_t n_patterns, const int32_t *tokens, int32_t n_tokens, uint32_t *id, char *err,
                       int32_t err_cap) {
    if (e == nullptr) {
        sf_set_err(err, err_cap, "grammar", "no engine");
        return SF_ERR_INVALID;
    }
    return sf_guard([&] { return compile(e, text, root, lazy, patterns, n_patterns, tokens, n_tokens, id, err, err_cap); },
                    [&](const char *msg) {
                        sf_set_err(err, err_cap, "grammar", msg);
                        return (int)SF_ERR_EXCEPTION;
                    });
}

int sf_grammar_free(sf_engine *e, uint32_t id) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    return sf_guard(
        [&] {
            std::lock_guard<std::mutex> lock(e->grammar_mu);
            return e->grammars.erase(id) == 1 ? (int)SF_OK : (int)SF_ERR_GRAMMAR;
        },
        [](const char *) { return (int)SF_ERR_EXCEPTION; });
}
