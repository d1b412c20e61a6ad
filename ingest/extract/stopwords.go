package extract

import "strings"

// lang is a language Local can tell, with its stop words.
type lang struct {
	code string
	stop map[string]bool
}

// languages are the languages Local tells apart. The tables are built once
// and only read.
var languages = [...]lang{
	{"en", set(`a about above after again against all also am an and any are aren't as at be because been
		before being below between both but by can can't cannot could couldn't did didn't do does doesn't
		doing don't down during each even ever every few for from further get got had hadn't has hasn't
		have haven't having he he's her here hers herself him himself his how however i i'm i've if in
		into is isn't it it's its itself just let's like made make many may me might more most much must
		my myself no nor not now of off often on once one only or other our ours ourselves out over own
		same shall she should shouldn't since so some still such than that that's the their theirs them
		themselves then there there's these they they're this those though through thus to too under
		until up upon us use used very via was wasn't we we're were weren't what when where which while
		who whom whose why will with within without won't would wouldn't yet you you're your yours
		yourself yourselves`)},
	{"fr", set(`a ai alors as au aussi autre autres aux avec avez avoir avons bien c car ce ceci cela ces
		cet cette comme d dans de des donc dont du elle elles en entre est et été étaient était être eux
		fait il ils j je l la le les leur leurs lui m ma mais me même mes moi mon n ne nos notre nous on
		ont ou où par pas peut plus pour qu quand que qui s sa sans se sera ses si son sont sous sur t ta
		te tes toi ton tous tout toute toutes très tu un une vos votre vous y ça`)},
	{"de", set(`aber alle allem allen aller alles als also am an andere anderen auch auf aus bei bin bis
		bist da damit dann das dass dein deine dem den denn der des dich die dir doch dort du durch ein
		eine einem einen einer eines er es etwas euch euer für gegen gewesen hab habe haben hat hatte
		hätte ich ihm ihn ihnen ihr ihre im in ist ja jede jedem jeden jeder jedes jetzt kann kein keine
		können man mein meine mich mir mit muss nach nicht nichts noch nun nur ob oder ohne schon sehr
		sein seine selbst sich sie sind so soll über um und uns unser unter viel vom von vor war waren
		warum was weil welche wenn wer werden wie wieder will wir wird wo zu zum zur zwischen`)},
	{"es", set(`a al algo algunas algunos ante antes como con contra cual cuando de del desde donde
		durante e el ella ellas ellos en entre era eran es esa esas ese eso esos esta estaba estado
		estas este esto estos está están fue fueron ha hace hay hasta la las le les lo los me mi mis
		mucho muy más nada ni no nos nosotros o otra otro para pero poco por porque que quien qué se sea
		según ser si sin sobre son su sus también tanto te tiene todo todos tu un una uno unos y ya yo`)},
	{"it", set(`a ad agli ai al all alla alle allo anche che chi ci come con cosa da dal dall dalla dalle
		dei del dell della delle dello di dove e ed era essere fatto gli già ha hanno ho i il in io la le
		lei lo loro lui ma mi mio molto ne nei nel nell nella nelle noi non o per perché più poi quale
		quando quella quello questa questo se sei si sia siamo sono stata stato su sua sue sui sul sull
		sulla suo tra tu tutti tutto un una uno vi voi è`)},
	{"nl", set(`aan al als ben bij daar dan dat de deze die dit doen door dus een en er geen had heb
		hebben heeft hem het hier hij hoe hun ik in is ja je kan kon maar me meer men met mij mijn na
		naar niet niets nog nu of om onder ons ook op over te tegen toch toen tot u uit van veel voor
		want was wat we wel werd wie wij wil worden zal ze zelf zich zij zijn zo zonder zou`)},
	{"pt", set(`a ao aos aquela aquele as até com como da das de dela dele deles do dos e ela elas ele
		eles em entre era essa esse esta este está estão eu foi for foram há isso isto já lhe mais mas
		me mesmo meu minha muito na nas nem no nos não nós o os ou para pela pelas pelo pelos por qual
		quando que se sem ser seu seus sua suas são também te tem tinha um uma você vocês à às é`)},
}

// stopIndex maps each stop word to the languages (indexes in languages)
// that have it.
var stopIndex = func() map[string][]int {
	m := make(map[string][]int)
	for i, l := range languages {
		for w := range l.stop {
			m[w] = append(m[w], i)
		}
	}
	return m
}()

// allStop is the stop words of every language, for text whose language is
// undetermined.
var allStop = func() map[string]bool {
	m := make(map[string]bool, len(stopIndex))
	for w := range stopIndex {
		m[w] = true
	}
	return m
}()

func set(words string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
