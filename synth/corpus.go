package synth

// The built-in vocabulary's merges are learned from this small weighted
// word list rather than shipped as data: a few hundred common English words
// (most frequent first) and code fragments, so prompts in English or code
// tokenize into multi-character tokens the way they would with a real BPE.

// englishWords are ordered by rough frequency; rank sets the weight.
const englishWords = `
the of and to in is that it for was on are as with be by this at from or
have an they which one you had not but what all were when we there can
been has more if will their would so no other into time only new some
could these two may first then do any like my now over such our man me
even most made after also did many before must through back years where
much your way well down should because each just those people how too
little state good very make world still own see men work long get here
between both life being under never day same another know while last
might us great old year off come since against go came right used take
three himself few house use during without again place around however
home small found thought went say part once general high upon school
every does got united left number course war until always away something
fact though water less public put think almost hand enough far took head
yet government system better set told nothing night end why called
didn't eyes find going look asked later knew point next program city
business give group toward days young let room president side social
given present several order national possible rather second face per
among form important often things looked early white case john become
large big need four within felt children along saw best church ever
least power development light thought family interest want members
others mind country area done question open line example model data
value file text string number function return error result type list
server request response client token tokens model cache memory time
input output message user system content true false null test tests
build run running start stop read write load save open close print
`

// codeFragments are pre-tokens as a pre-tokenizer would cut them from
// source code, most frequent first.
var codeFragments = []string{
	"\n", "\n\n", " =", "(", ")", " {\n", "}\n", ",", ".", "\n\t",
	"\t", " :=", " ==", " !=", " return", " if", " func", " for", " err",
	" nil", " int", " string", " def", " self", " import", " from",
	" class", " const", " var", " let", " else", " in", " range", " package",
	" true", " false", " None", " print", "()", "):\n", ":\n", ";\n", " //",
	" #", " +", " -", " *", " /", " <", " >", " <=", " >=", " &&", " ||",
	" ->", " =>", " [", "]", " \"", "\"", "'", " '", "...", " ...", "   ",
	"       ", "  ", " fmt", " Println", " main", " len", " append",
	" make", " go", " defer", " struct", " interface", " type", " switch",
	" case", " break", " continue", " while", " lambda", " async", " await",
	" try", " except", " raise", " with", " as", " assert", " yield",
	" public", " static", " void", " new", " this", " null", " undefined",
	" console", " log", " function", " export", " default", " http", " json",
	" api", " url", " id", " name", " key", " value", " data", " ctx",
	" context", " args", " kwargs", " Error", " Errorf", " os", " io",
}
