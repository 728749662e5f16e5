(function(){
var box=document.getElementById('run');
if(box&&box.getAttribute('data-status')==='running'){
  var url='/api/runs/'+encodeURIComponent(box.getAttribute('data-run-id'));
  var set=function(id,text){var e=document.getElementById(id);if(e){e.textContent=text;}};
  var poll=function(){
    fetch(url,{headers:{'Accept':'application/json'}}).then(function(r){return r.json();}).then(function(run){
      set('run-status',run.status);
      set('run-done',String(run.progress.done));
      set('run-calls',String(run.cost.llm_calls));
      set('run-tokens',String(run.cost.tokens));
      if(run.status==='running'){setTimeout(poll,400);}else{location.reload();}
    }).catch(function(){setTimeout(poll,1000);});
  };
  setTimeout(poll,200);
}
var count=document.getElementById('count');
if(count&&count.hasAttribute('data-events')&&window.EventSource){
  var noun=count.getAttribute('data-noun'),url=count.getAttribute('data-events');
  var events=new EventSource(url+'?count='+encodeURIComponent(count.getAttribute('data-count')));
  events.addEventListener(noun+'s',function(e){
    var told=JSON.parse(e.data),box=document.getElementById('new-items');
    if(box&&told.new>0){box.firstChild.textContent=told.new+' new '+noun+(told.new===1?'':'s')+' arrived: show them';box.hidden=false;}
  });
}
document.documentElement.setAttribute('data-ready','1');
})();
