package reply

import "testing"

func TestXMLGrammarsAcceptTheirCalls(t *testing.T) {
	cases := []struct{ file, calls string }{
		{"Qwen3-Coder.jinja", qwenCoderCalls},
		{"GLM-4.6.jinja", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n<tool_call>note\n<arg_key>text</arg_key>\n<arg_value>x < y</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\"]</arg_value>\n</tool_call>"},
		{"GLM-4.7-Flash.jinja", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"},
		{"MiniMax-M2.jinja", "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n<invoke name=\"note\">\n<parameter name=\"text\">hi</parameter>\n</invoke>\n</minimax:tool_call>"},
		{"deepseek-ai-DeepSeek-V3.2.jinja", "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
		{"openbmb-MiniCPM5-1B.jinja", "<function name=\"get_weather\"><param name=\"city\">Paris</param><param name=\"days\">3</param></function>"},
		{"tencent-Hy3.jinja", "<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Paris</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>"},
		{"ByteDance-Seed-OSS.jinja", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f := templateFormat(t, c.file)
			checkGrammarAccepts(t, f, c.calls, false)
			got := collect(f, weatherOptions(), []string{c.calls})
			if len(got.calls) == 0 || got.content != "" || got.warned {
				t.Fatalf("the parser reads %+v", got)
			}
		})
	}
}

func TestXMLGrammarSingleCall(t *testing.T) {
	f := templateFormat(t, "Qwen3-Coder.jinja")
	one := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
	checkGrammarAccepts(t, f, one, true)
	c, err := f.Grammar(weatherTools, Requirement{Required: true, Single: true})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := parseGrammar(c.GBNF)
	if g.Accepts(qwenCoderCalls) {
		t.Fatal("a single-call grammar accepts two calls")
	}
	// A missing required parameter is refused.
	if g.Accepts("<tool_call>\n<function=get_weather>\n</function>\n</tool_call>") {
		t.Fatal("the grammar accepts a call without its required parameter")
	}
}
